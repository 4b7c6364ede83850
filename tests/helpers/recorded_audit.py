"""``workbench audit`` in a process of its own, each scoring call's output saved: what the tests of the
engine on several hosts run as the driver (in a namespace, ``ip netns exec``) and locally, to compare the
two row by row.

    python -m helpers.recorded_audit RECORD_DIR classifier|embedding -- audit ARGS...

Each call of the classifier's ``predict_dataset`` (or the embedding encoder's ``encode``) is saved as
``RECORD_DIR/NNN-pool.npy`` or ``NNN-here.npy`` (scored on a Ray pool or in this process); the exit code
is the audit's. Needs ``tests/`` on ``PYTHONPATH`` beside the repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def _recorded(fn, pooled, folder: Path):
    calls = [0]

    def recorded(*args, **kwargs):
        out = fn(*args, **kwargs)
        where = "pool" if pooled(args, kwargs) else "here"
        np.save(folder / f"{calls[0]:03d}-{where}.npy", np.asarray(out))
        calls[0] += 1
        return out

    return recorded


def main(argv: list[str]) -> int:
    folder, task, sep, *audit = argv
    assert sep == "--", "usage: RECORD_DIR classifier|embedding -- audit ARGS..."
    folder_path = Path(folder)
    folder_path.mkdir(parents=True, exist_ok=True)
    if task == "classifier":
        from workbench.runtime import ortinfer as target

        attr, pooled = "predict_dataset", lambda a, k: k.get("pool") is not None
    else:
        from workbench.embed import encode

        target, attr, pooled = encode.OnnxEncoder, "encode", lambda a, k: a[0].pool is not None
    setattr(target, attr, _recorded(getattr(target, attr), pooled, folder_path))
    from workbench.cli import main as cli

    return cli(audit)


def assert_same_figures(a: dict, b: dict) -> None:
    """Two classifier audits' summary.json give the same figures: slices, each variant's per-slice drift, flips and
    budget checks, and the verdict."""
    assert a["slices"] == b["slices"]
    for qa, qb in zip(a["quantization"], b["quantization"], strict=True):
        for key in ("name", "overall", "slices", "n_flips", "flips", "within_budget", "violations", "worst_slice"):
            assert qa[key] == qb[key], key
    for key in ("status", "chosen", "exit_code"):
        assert a["verdict"][key] == b["verdict"][key], key


TOL = 1e-5  # float32 rounding of the same graph on the same arrays in two processes


def assert_close_figures(a, b, path: str = "") -> None:
    """Two embedding audits' figures (summary.json's ``evaluation``): the same keys, lists and words, and every
    number within :data:`TOL` (NDCG@10, recall@10, MRR@10, cosine, neighbour overlap, per slice and overall)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_close_figures(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close_figures(x, y, f"{path}/{i}")
    elif isinstance(a, float):
        assert abs(a - b) <= TOL, f"{path}: {a} != {b}"
    else:
        assert a == b, path


def assert_same_embedding_figures(a: dict, b: dict) -> None:
    """Two embedding audits' summary.json give the same figures (within :data:`TOL`) and the same verdict."""
    assert_close_figures(a["evaluation"], b["evaluation"])
    for key in ("status", "exit_code"):
        assert a["verdict"][key] == b["verdict"][key], key


def calls(folder: Path) -> list[tuple[bool, np.ndarray]]:
    """The recorded calls in order: (scored on a pool, output)."""
    return [(p.stem.endswith("-pool"), np.load(p)) for p in sorted(Path(folder).glob("*.npy"))]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
