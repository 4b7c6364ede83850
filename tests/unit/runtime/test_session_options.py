"""make_session's memory and scheduling choices (the settings benchmarks/bench_small_batch.py compares) reach the
ONNX Runtime session it opens; a wrong execution mode is one line naming the value and the choices. The options the
session holds are asserted, never a timing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.runtime.session import EXECUTION_MODES, InferenceError, make_session


def _graph(folder: Path) -> Path:
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
                              [numpy_helper.from_array(np.ones((8, 4), dtype=np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime 1.19 (the training stack) reads
    path = folder / "g.onnx"
    onnx.save(model, str(path))
    return path


def _options(path: Path, **kw):
    opts = make_session(path, threads=1, **kw).get_session_options()
    return opts.enable_mem_pattern, opts.enable_cpu_mem_arena, opts.execution_mode


def test_parallel_has_the_inter_op_threads_it_needs(tmp_path: Path) -> None:
    """With one inter-op thread ONNX Runtime opens a parallel session as a sequential one."""
    path = _graph(tmp_path)
    for threads, inter in ((1, 2), (2, 2), (3, 3)):
        opts = make_session(path, threads=threads, execution_mode="parallel").get_session_options()
        assert (opts.execution_mode, opts.inter_op_num_threads) == (ort.ExecutionMode.ORT_PARALLEL, inter)
    assert make_session(path, threads=2).get_session_options().inter_op_num_threads == 1  # sequential: one


def test_the_defaults_are_onnx_runtimes_own(tmp_path: Path) -> None:
    assert _options(_graph(tmp_path)) == (True, True, ort.ExecutionMode.ORT_SEQUENTIAL)


@pytest.mark.parametrize("kw, expected", [
    ({"memory_pattern": False}, (False, True, ort.ExecutionMode.ORT_SEQUENTIAL)),
    ({"cpu_arena": False}, (True, False, ort.ExecutionMode.ORT_SEQUENTIAL)),
    ({"execution_mode": "parallel"}, (True, True, ort.ExecutionMode.ORT_PARALLEL)),
    ({"memory_pattern": False, "cpu_arena": False, "execution_mode": "sequential"}, (False, False, ort.ExecutionMode.ORT_SEQUENTIAL)),
])
def test_each_choice_reaches_the_session(tmp_path: Path, kw: dict, expected: tuple) -> None:
    path = _graph(tmp_path)
    assert _options(path, **kw) == expected
    out = make_session(path, threads=1, **kw).run(None, {"x": np.ones((2, 8), dtype=np.float32)})[0]
    np.testing.assert_array_equal(out, np.full((2, 4), 8.0, dtype=np.float32))  # the same answer under every choice


def test_a_wrong_execution_mode_names_the_choices(tmp_path: Path) -> None:
    assert EXECUTION_MODES == ("sequential", "parallel")
    with pytest.raises(InferenceError, match=r"execution_mode must be one of \['sequential', 'parallel'\], got 'async'"):
        make_session(_graph(tmp_path), execution_mode="async")
