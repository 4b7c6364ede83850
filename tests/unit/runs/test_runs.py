"""Run folders and result files: atomic writes, JSON round trips, listing."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from workbench import runs
from workbench.core import serial


class Colour(str, enum.Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    x: float
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outer:
    name: str
    inner: list[Inner]
    table: dict[str, Inner]
    colour: Colour
    path: Path
    maybe: Optional[Inner] = None
    loss: float = float("nan")
    extra: dict = field(default_factory=dict)


def test_result_round_trip(tmp_path):
    obj = Outer("a", [Inner(1.5, ("t",))], {"k": Inner(2.0)}, Colour.RED, Path("/x/y"), None, 0.25, {"n": [1, 2]})
    path = runs.save_result(obj, tmp_path / "r.json")
    assert runs.load_result(Outer, path) == obj


def test_non_finite_floats_become_null():
    assert serial.to_dict(Inner(float("nan")))["x"] is None
    assert serial.from_dict(Inner, {"x": None}).x != serial.from_dict(Inner, {"x": None}).x  # NaN back


def test_atomic_writes_get_the_usual_permissions(tmp_path):
    import os
    import stat

    path = runs.atomic_write_json(tmp_path / "r.json", {"v": 1})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    """The write fails *after* the new bytes went to disk (the disk fills while they are flushed):
    a writer that wrote the target in place would leave the new or a cut payload behind; the atomic
    one leaves the old file and no temporary."""
    import errno
    import os

    path = tmp_path / "result.json"
    runs.atomic_write_json(path, {"v": 1})
    written: list[int] = []

    def disk_full(fd):
        written.append(os.fstat(fd).st_size)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        runs.atomic_write_json(path, {"v": 2, "pad": "x" * 100_000})
    assert written and written[0] > 100_000, "the failure came after the payload was written"
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary file left


# A writer process that is SIGKILLed in the middle of a write: it writes through workbench.runs'
# helpers, and a hook placed *inside* the write (after part of the payload is on disk) tells the
# test through stdout, then blocks, so the kill always lands mid-write (no timing involved).
_WRITER = r"""
import os, sys, time
from pathlib import Path
from workbench import runs

mode, target = sys.argv[1], Path(sys.argv[2])
CHUNK = b"x" * (1 << 20)

def signal_and_block(where):
    print(where, flush=True)
    while True:
        time.sleep(60)

if mode == "json":
    # atomic_write_json -> atomic_write_bytes: block after the payload went to the temporary file
    # (half of it written, not yet fsynced nor renamed)
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, fh):
            self.fh = fh
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)
        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            signal_and_block("writing")
        def __getattr__(self, name):
            return getattr(self.fh, name)

    os.fdopen = lambda fd, *a, **k: HalfWriter(real_fdopen(fd, *a, **k))
    runs.atomic_write_json(target, {"v": 2, "payload": "y" * (8 << 20)})
elif mode == "file":
    # atomic_path (what torch.onnx.export / onnx.save write through): 64 MiB in 1 MiB chunks
    with runs.atomic_path(target) as tmp:
        with open(tmp, "wb") as fh:
            for i in range(64):
                fh.write(CHUNK)
                if i == 8:
                    fh.flush()
                    signal_and_block("writing")
elif mode in ("dir", "dir-swap"):
    # atomic_dir (save_pretrained): a large file and a small one in a folder
    if mode == "dir-swap":
        # block at the first step that puts the complete new folder in place of the old one
        # (a rename, or the removal of the old folder after an exchange)
        import shutil
        real_replace, real_rmtree = os.replace, shutil.rmtree
        def replace(src, dst):
            real_replace(src, dst)
            signal_and_block("swapping")
        def rmtree(path, *a, **k):
            signal_and_block("swapping")
        os.replace, shutil.rmtree = replace, rmtree
    with runs.atomic_dir(target) as tmp:
        (tmp / "config.json").write_text('{"v": 2}')
        with open(tmp / "weights.bin", "wb") as fh:
            for i in range(64):
                fh.write(CHUNK)
                if i == 8 and mode == "dir":
                    fh.flush()
                    signal_and_block("writing")
print("finished", flush=True)
"""


def _kill_mid_write(mode: str, target: Path) -> str:
    import os
    import signal
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, mode, str(target)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    try:
        said = proc.stdout.readline().strip()  # blocks until the writer is inside the write
        assert said in ("writing", "swapping"), f"writer ended before the write: {said!r} {proc.stderr.read()}"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return said


def test_a_killed_json_write_leaves_the_old_result(tmp_path):
    path = tmp_path / "run" / "export.json"
    runs.save_result(Inner(1.0, ("old",)), path)
    _kill_mid_write("json", path)
    # the temporary file holds part of the new payload, and is there: the kill landed mid-write
    leftovers = [p for p in path.parent.iterdir() if p != path]
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".export.json.") and leftovers[0].stat().st_size > 0
    assert runs.load_result(Inner, path) == Inner(1.0, ("old",))
    # the half-written file is never read back as a result
    assert runs.find_results(tmp_path / "run") == {"export": path}
    assert runs.list_runs(tmp_path)[0].stages == ("export",)


def test_a_killed_file_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"old graph")
    _kill_mid_write("file", path)
    assert path.read_bytes() == b"old graph"
    partial = [p for p in tmp_path.iterdir() if p != path]
    assert len(partial) == 1 and partial[0].stat().st_size >= 9 << 20  # it was killed mid-write
    assert partial[0].name.startswith(".") and partial[0].suffix == ".onnx"  # hidden, never taken for the graph


@pytest.mark.parametrize("mode", ["dir", "dir-swap"])
def test_a_killed_folder_write_leaves_the_old_folder(tmp_path, mode):
    target = tmp_path / "run" / "checkpoint"
    with runs.atomic_dir(target) as tmp:
        (tmp / "config.json").write_text('{"v": 1}')
        (tmp / "weights.bin").write_bytes(b"old weights")
    said = _kill_mid_write(mode, target)
    assert said == ("writing" if mode == "dir" else "swapping")
    # the folder is whole: killed mid-write, the old one; killed right after the swap (one
    # renameat2 exchange, before the old folder is removed), the complete new one
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "weights.bin"]
    if mode == "dir":
        assert (target / "config.json").read_text() == '{"v": 1}'
        assert (target / "weights.bin").read_bytes() == b"old weights"
    else:
        assert (target / "config.json").read_text() == '{"v": 2}'
        assert (target / "weights.bin").stat().st_size == 64 << 20
        # the old folder waits, whole, in the hidden leftover the exchange put it in
        (old,) = [p for p in target.parent.iterdir() if p != target]
        assert (old / "weights.bin").read_bytes() == b"old weights"
    # leftovers are hidden folders beside it, never listed as a run or a stage
    assert all(p.name.startswith(".") for p in target.parent.iterdir() if p != target)
    assert [r.path for r in runs.list_runs(tmp_path)] == [tmp_path / "run"]


def test_atomic_path_renames_only_on_success(tmp_path):
    target = tmp_path / "model.onnx"
    with runs.atomic_path(target) as tmp:
        tmp.write_bytes(b"first")
    with pytest.raises(RuntimeError):
        with runs.atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("export failed")
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_run_folders_are_unique_and_listed(tmp_path):
    a = runs.new_run_dir("demo", tmp_path)
    b = runs.new_run_dir("demo", tmp_path)
    assert a != b and a.parent == tmp_path
    runs.atomic_write_json(a / "train.json", {"ok": True})
    listed = {r.path: r.stages for r in runs.list_runs(tmp_path)}
    assert listed[a] == ("train",) and listed[b] == ()
    with pytest.raises(FileNotFoundError, match="run the stage first"):
        runs.load_result(Inner, b / "export.json")


def test_atomic_dir_replaces_a_folder_only_when_complete(tmp_path):
    target = tmp_path / "checkpoint"
    with runs.atomic_dir(target) as tmp:
        (tmp / "weights").write_text("v1")
    with pytest.raises(RuntimeError):
        with runs.atomic_dir(target) as tmp:
            (tmp / "weights").write_text("half")
            raise RuntimeError("save failed")
    assert (target / "weights").read_text() == "v1"
    with runs.atomic_dir(target) as tmp:
        (tmp / "weights").write_text("v2")
    assert (target / "weights").read_text() == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_atomic_write_npy_round_trip(tmp_path):
    import numpy as np

    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    back = np.load(runs.atomic_write_npy(tmp_path / "a.npy", arr))
    assert back.dtype == np.float32 and np.array_equal(back, arr)


def test_find_results_knows_the_demo_layout(tmp_path):
    run = tmp_path / "run"
    for rel in ("compare.json", "export/export.json", "fusion/fusion.json", "quantize/dynamic/quantize.json",
                "search/search.json", "search/candidates/x/quantize.json"):
        runs.atomic_write_json(run / rel, {})
    found = runs.find_results(run)
    assert {k: v.relative_to(run).as_posix() for k, v in found.items()} == {
        "compare": "compare.json", "export": "export/export.json", "fusion": "fusion/fusion.json",
        "quantize": "quantize/dynamic/quantize.json", "search": "search/search.json",
    }
    listed = runs.list_runs(tmp_path)
    assert listed[0].stages == ("compare", "export", "fusion", "quantize", "search")
    with pytest.raises(FileNotFoundError, match="no run folder"):
        runs.find_results(tmp_path / "missing")


def test_load_result_takes_the_folder_when_given_the_file_name(tmp_path):
    runs.save_result(Inner(3.0), tmp_path / "inner.json")
    assert runs.load_result(Inner, tmp_path, "inner.json") == Inner(3.0)
    assert runs.load_result(Inner, tmp_path / "inner.json", "inner.json") == Inner(3.0)
    with pytest.raises(FileNotFoundError, match="no saved result"):
        runs.load_result(Inner, tmp_path)
