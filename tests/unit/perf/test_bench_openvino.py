"""The embedding benchmark's OpenVINO rows (benchmarks/openvino_embed.py, benchmarks/bench_embed.py): the worker's
protocol on a stand-in model, the one line that leaves the rows out when the OpenVINO environment is missing or its
worker cannot export, and (only where `make setup-openvino` made .venv-openvino) the real worker on the built-in
MiniLM. No timing is asserted."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers.benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parents[3]
OV_PYTHON = ROOT / ".venv-openvino" / "bin" / "python"
openvino_embed = load_benchmark("openvino_embed")
bench_embed = load_benchmark("bench_embed")


class StandIn:
    """What the worker needs of a SentenceTransformer: ``encode``, recording its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], int]] = []

    def encode(self, texts, batch_size: int, convert_to_numpy: bool, show_progress_bar: bool):
        assert convert_to_numpy and not show_progress_bar
        self.calls.append((list(texts), batch_size))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float64)


def test_the_worker_answers_one_line_per_request(tmp_path: Path) -> None:
    models = {"fp32": StandIn(), "int8": StandIn()}
    (tmp_path / "t.json").write_text(json.dumps(["ab", "abcd", "a"]))
    requests = [{"op": "texts", "id": "0", "texts": ["one", "three"]}, {"op": "run", "model": "int8", "id": "0"},
                {"op": "embed", "model": "fp32", "texts_file": str(tmp_path / "t.json"), "out": str(tmp_path / "e.npy"), "batch": 2},
                {"op": "ping"}, {"op": "run", "model": "int8", "id": "9"}, {"op": "fly"}, {"op": "quit"},
                {"op": "ping"}]  # after quit: never read
    replies = io.StringIO()
    openvino_embed.serve(models, (json.dumps(r) + "\n" for r in requests), replies)
    lines = [json.loads(line) for line in replies.getvalue().splitlines()]
    assert lines[:4] == [{"ok": True}] * 4 and lines[6] == {"ok": True} and len(lines) == 7
    assert lines[4]["ok"] is False and "KeyError" in lines[4]["error"]  # a batch never sent
    assert lines[5] == {"ok": False, "error": "ValueError: unknown op 'fly'"}
    # run: the kept batch, as one batch; embed: the file's texts at the asked batch size, saved as float32
    assert models["int8"].calls == [(["one", "three"], 2)]
    assert models["fp32"].calls == [(["ab", "abcd", "a"], 2)]
    emb = np.load(tmp_path / "e.npy")
    assert emb.dtype == np.float32 and emb[:, 0].tolist() == [2.0, 4.0, 1.0]
    # the fast path the timing takes compares the reply with exactly this line
    assert replies.getvalue().splitlines()[0] + "\n" == '{"ok": true}\n'


def _args(**kw):
    return SimpleNamespace(no_openvino=False, openvino_python=str(kw.pop("python")), threads=1, **kw)


def test_a_missing_environment_leaves_the_rows_out_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    missing = tmp_path / "no-venv" / "bin" / "python"
    assert bench_embed._openvino(_args(python=missing), ROOT, tmp_path, ["a"]) is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("bench_embed: OpenVINO rows left out: no OpenVINO environment at ")
    assert str(missing) in out and "bash scripts/setup_openvino_env.sh" in out and "--no-openvino" in out
    assert bench_embed._openvino(SimpleNamespace(no_openvino=True), ROOT, tmp_path, ["a"]) is None
    assert capsys.readouterr().out == ""


@pytest.mark.timeout(300)
def test_a_worker_that_cannot_export_leaves_the_rows_out_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """This Python has no optimum-intel: the worker starts, fails its export and says why in its one reply."""
    try:
        import optimum.intel  # noqa: F401
        pytest.skip("this environment has optimum-intel: the worker would export")
    except ImportError:
        pass
    with pytest.raises(openvino_embed.OpenVinoError, match=r"the OpenVINO worker failed: export: ModuleNotFoundError"):
        openvino_embed.OpenVinoWorker.start(sys.executable, tmp_path / "model", tmp_path / "w", ["a text"], 1)
    assert bench_embed._openvino(_args(python=sys.executable), tmp_path / "model", tmp_path, ["a text"]) is None
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("openvino: exporting and quantizing in ")
    assert len(lines) == 2 and lines[1].startswith("bench_embed: OpenVINO rows left out: the OpenVINO worker failed: export: ")


@pytest.mark.slow  # exports and quantizes MiniLM in the OpenVINO environment (1-2 min on 2 busy cores)
@pytest.mark.heavy
@pytest.mark.timeout(900)
@pytest.mark.skipif(not OV_PYTHON.is_file(), reason="no .venv-openvino (make setup-openvino): the OpenVINO rows need it")
def test_the_openvino_worker_encodes_the_builtin_model(tmp_path: Path) -> None:
    from workbench.embed.export import reference_encode
    from workbench.models.load import minilm_path

    texts = ["a heist film set in Paris", "the acting is wooden and the plot drags", "a warm family comedy"]
    worker = openvino_embed.OpenVinoWorker.start(OV_PYTHON, minilm_path(), tmp_path / "ov", texts * 3, 2)
    try:
        info = worker.info
        assert {"sentence-transformers", "optimum-intel", "openvino", "nncf", "transformers"} <= set(info["versions"])
        assert Path(info["fp32_graph"]).is_file() and Path(info["int8_graph"]).is_file() and info["calibration_texts"] == 9
        assert Path(info["model_folder"]).is_relative_to(tmp_path)  # a copy: never the package's own folder
        fp32, int8 = (worker.encoder(m).encode(texts, 2) for m in (openvino_embed.FP32, openvino_embed.INT8))
        ref = reference_encode(minilm_path(), texts, 2)
        assert fp32.shape == int8.shape == ref.shape == (3, 384) and fp32.dtype == np.float32
        # the same model in FP32 on another runtime: equal up to float32 rounding (export validation's threshold)
        assert np.min(np.sum(fp32 * ref, axis=1)) > 0.9999
        np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-3)  # the Normalize module ran
        assert worker.encoder(openvino_embed.INT8).encode_batch(texts[:1]) is None  # the timing's call
        assert worker.round_trip_ms(5) > 0
    finally:
        worker.close()
    assert worker.proc.returncode == 0
