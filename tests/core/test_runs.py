"""Run folders and result files: atomic writes, JSON round trips, listing."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from workbench import runs, serial


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


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "result.json"
    runs.atomic_write_json(path, {"v": 1})

    class Boom:
        pass

    with pytest.raises(TypeError):
        runs.atomic_write_json(path, {"v": Boom()})
    assert path.read_text().strip().endswith("}") and '"v": 1' in path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary file left


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
