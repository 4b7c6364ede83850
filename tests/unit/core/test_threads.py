"""``OMP_NUM_THREADS`` caps ONNX Runtime as it caps PyTorch: read by workbench.core.threads and
applied to every session the workbench opens without an explicit thread count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.core.threads import cap_session_threads, requested_threads
from workbench.perf.machine_profile import default_threads, usable_cpus
from workbench.runtime.ortinfer import make_session


@pytest.mark.parametrize("raw, expected", [("1", 1), ("3", 3), (" 2 ", 2), ("4,2", 4), ("0", None), ("-1", None),
                                           ("two", None), ("", None)])
def test_the_variable_is_read_as_openmp_reads_it(raw: str, expected, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", raw)
    assert requested_threads() == expected


def test_unset_means_no_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert requested_threads() is None
    assert default_threads() == usable_cpus()


def test_the_timing_default_follows_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert default_threads() == 1


def _graph(folder: Path) -> Path:
    w = np.ones((8, 4), dtype=np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
                              [numpy_helper.from_array(w, "w")])
    path = folder / "g.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime 1.19 (the training stack) reads
    onnx.save(model, str(path))
    return path


def test_a_session_takes_the_variable_unless_told_otherwise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _graph(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert make_session(path).get_session_options().intra_op_num_threads == 1
    assert make_session(path, threads=2).get_session_options().intra_op_num_threads == 2  # an explicit count wins
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert make_session(path).get_session_options().intra_op_num_threads == 0  # ONNX Runtime's own default


def test_cap_session_threads_leaves_the_default_alone_without_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime as ort

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert cap_session_threads(ort.SessionOptions()).intra_op_num_threads == 0
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    opts = cap_session_threads(ort.SessionOptions())
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (1, 1)
