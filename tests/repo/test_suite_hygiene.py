"""The test suite's own rules: the ``gpu`` marker skips without CUDA and runs with it; markers are
strict; every test has a time limit."""

from __future__ import annotations

from pathlib import Path

import onnxruntime  # imported before pytester snapshots sys.modules: torch cannot be imported twice
import pytest
import torch

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

GPU_TEST = """
import pytest

@pytest.mark.gpu
def test_needs_cuda():
    import torch
    assert torch.cuda.is_available()

def test_plain():
    pass
"""


def _suite(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makefile(".toml", pyproject=PYPROJECT.read_text().replace('testpaths = ["tests"]', 'testpaths = ["."]'))
    # a module name no real test file has: in-process runs share sys.modules with this suite
    # (tests/unit/runtime/test_gpu.py imported first made this file an import-mismatch error)
    pytester.makepyfile(test_gpu_marker_probe=GPU_TEST)


def test_gpu_tests_skip_without_cuda(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _suite(pytester)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*marked gpu: no CUDA device*"])


def test_gpu_tests_run_with_cuda(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    _suite(pytester)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2)


def test_cuda_without_the_onnxruntime_provider_still_skips(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    _suite(pytester)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*no CUDAExecutionProvider*"])


def test_an_unknown_marker_is_an_error(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    pytester.makepyfile(test_typo="import pytest\n\n@pytest.mark.slw\ndef test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:randomly", "test_typo.py")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'slw' not found in `markers` configuration option*"])


def test_a_hung_test_fails_at_its_timeout(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    pytester.makepyfile(test_hang="import time\nimport pytest\n\n@pytest.mark.timeout(1)\ndef test_hangs():\n    time.sleep(30)\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "test_hang.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Timeout*"])


def test_every_test_has_a_default_time_limit(request: pytest.FixtureRequest) -> None:
    assert float(request.config.getini("timeout")) == 600
    assert "--strict-markers" in request.config.getini("addopts")


def test_the_suite_runs_in_a_random_order(pytester: pytest.Pytester) -> None:
    """pytest-randomly (pinned in requirements/constraints.txt) shuffles the tests, and `make test` /
    `make test-fast` ask for it: two seeds give two orders of the same tests."""
    _suite(pytester)
    names = [f"test_{i:02d}" for i in range(20)]
    pytester.makepyfile(test_order="\n".join(f"def {n}():\n    pass\n" for n in names))
    orders = []
    for seed in (1, 2):
        result = pytester.runpytest_subprocess("-p", "randomly", f"--randomly-seed={seed}", "-v", "test_order.py")
        result.assert_outcomes(passed=20)
        result.stdout.fnmatch_lines([f"*randomly-seed={seed}*"])
        orders.append([line.split("::")[1].split()[0] for line in result.outlines if "::test_" in line and "PASSED" in line])
    assert sorted(orders[0]) == sorted(orders[1]) == names
    assert orders[0] != names and orders[1] != names and orders[0] != orders[1]
    makefile = (PYPROJECT.parent / "Makefile").read_text()
    for target in ("test:", "test-fast:"):
        recipe = makefile.split(f"\n{target}", 1)[1].split("\n\n", 1)[0]
        assert "-p randomly" in recipe, f"`make {target[:-1]}` does not run the tests in a random order"
    pins = (PYPROJECT.parent / "requirements" / "constraints.txt").read_text().splitlines()
    assert any(line.startswith("pytest-randomly==") for line in pins)


# ---- docs/measuring.md's "the tests never assert timings" ------------------------------------------------
_TIMING_NAME = r"_(s|ms|sec|secs)\b|\b(seconds|elapsed|wall|duration|latency|took)\b|perf_counter|monotonic|time\.time"


def timing_asserts(source: str) -> list[str]:
    """Asserts that compare a time (a name or call that reads as seconds/milliseconds/elapsed) with a
    positive number by <, <=, > or >=: a timing assertion. ``x > 0`` is not one (a figure exists)."""
    import ast
    import re

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            sides = [cmp.left, *cmp.comparators]
            for op, a, b in zip(cmp.ops, sides, sides[1:]):
                if not isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
                    continue
                for timed, bound in ((a, b), (b, a)):
                    positive = isinstance(bound, ast.Constant) and isinstance(bound.value, (int, float)) and bound.value > 0
                    if positive and re.search(_TIMING_NAME, ast.unparse(timed)):
                        found.append(f"line {node.lineno}: {ast.unparse(cmp)}")
    return found


def test_timing_asserts_are_found():
    assert timing_asserts("assert result.seconds < 30\nassert wall_s <= 5.0\nassert 10 > time.perf_counter() - t0\n") == [
        "line 1: result.seconds < 30", "line 2: wall_s <= 5.0", "line 3: 10 > time.perf_counter() - t0"]
    assert timing_asserts("assert run.step_s > 0\nassert len(steps) >= 2\nassert acc > 0.65\n") == []


def test_no_test_asserts_a_timing():
    """The documentation says the tests never assert timings (they belong to the benchmarks' tables)."""
    tests = Path(__file__).resolve().parents[1]
    hits = {str(p.relative_to(tests)): h for p in sorted(tests.rglob("*.py")) if p.name != Path(__file__).name
            and (h := timing_asserts(p.read_text()))}
    assert hits == {}, hits


def test_tests_sharing_a_module_fixture_form_one_xdist_group():
    """`make test` runs pytest-xdist with --dist loadgroup: a test that uses a fixture built once per module
    is grouped under its module, so one worker builds that fixture once; a test with only function or
    session fixtures is free to go to any worker."""
    from types import SimpleNamespace as NS

    from tests.conftest import module_fixture_group

    def item(nodeid: str, **scopes: str):
        return NS(nodeid=nodeid, _fixtureinfo=NS(name2fixturedefs={n: [NS(scope=s)] for n, s in scopes.items()}))

    assert module_fixture_group(item("tests/unit/quant/test_q.py::test_a[x]", tmp_path="function",
                                     baseline="module")) == "tests/unit/quant/test_q.py"
    assert module_fixture_group(item("tests/unit/quant/test_q.py::test_b", quick_data="session")) is None
    assert module_fixture_group(item("tests/unit/x.py::T::test_c", thing="class")) == "tests/unit/x.py"


BUILT_ONCE = """
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def built():
    with open(os.environ["BUILD_LOG"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
    return 1


@pytest.mark.parametrize("i", range(4))
def test_uses_it(built, i):
    pass


@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
"""


def test_two_workers_build_a_module_fixture_once(pytester: pytest.Pytester, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The grouping at work, as `make test` runs it (two workers, --dist loadgroup, a random order): the
    fixture's tests all go to one worker, which builds it once. (pytest 9.2 broke this silently: its node
    ids drop pytest-xdist's group suffix; pyproject.toml keeps pytest below it.)"""
    _suite(pytester)
    pytester.makepyfile(test_built_once_probe=BUILT_ONCE)
    for seed in (1, 2, 3):
        log = tmp_path / f"built-{seed}.log"
        monkeypatch.setenv("BUILD_LOG", str(log))
        result = pytester.runpytest_subprocess("-p", "randomly", f"--randomly-seed={seed}", "-n", "2", "--dist", "loadgroup",
                                               "test_built_once_probe.py")
        result.assert_outcomes(passed=10)
        assert len(log.read_text().splitlines()) == 1, (seed, log.read_text())


NOTEBOOK_TESTS = """
import pytest

NOTEBOOKS = ["03_a", "05_audit_your_own_model"]


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_notebook_executes(nb):
    pass


@pytest.mark.heavy
@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_committed_defaults_write_no_stderr(nb):
    pass
"""


def test_a_small_notebook_run_gives_way_to_its_defaults_run(pytester: pytest.Pytester) -> None:
    """Where a notebook's committed-defaults run is selected, its small run is deselected (the defaults
    run covers it), except notebook 05's, which reads a user-style file; where the defaults runs are
    not selected (-m "not heavy", as make test-fast), every small run runs. The defaults runs of the
    notebooks that start from the workshop checkpoint form one xdist group, and the heavy tests run first."""
    from types import SimpleNamespace as NS

    from tests.conftest import DEFAULTS_GROUP, _notebook_of

    name = "test_committed_defaults_write_no_stderr[00_tour]"
    for nodeid in (f"tests/notebooks/test_notebooks.py::{name}", f"tests/notebooks/test_notebooks.py::{name}@{DEFAULTS_GROUP}"):
        assert _notebook_of(NS(nodeid=nodeid, name=name), "test_committed_defaults_write_no_stderr") == "00_tour"
        assert _notebook_of(NS(nodeid=nodeid, name=name), "test_notebook_executes") is None
    assert DEFAULTS_GROUP
    _suite(pytester)
    pytester.mkdir("notebooks")
    pytester.path.joinpath("notebooks", "test_notebooks.py").write_text(NOTEBOOK_TESTS)
    everything = pytester.runpytest_subprocess("-v", "-p", "no:randomly", "notebooks")
    everything.assert_outcomes(passed=3, deselected=1)
    ran = [line.split("::")[1].split()[0] for line in everything.outlines if "PASSED" in line and "::" in line]
    # the heavy tests first (pytest-xdist hands work out in this order), though the module defines them last: the
    # runs that start from the workshop checkpoint (their group builds it), then the other committed-defaults runs
    assert ran == ["test_committed_defaults_write_no_stderr[05_audit_your_own_model]",
                   "test_committed_defaults_write_no_stderr[03_a]",
                   "test_notebook_executes[05_audit_your_own_model]"]
    everything.stdout.fnmatch_lines(["*small notebook runs deselected*03_a*"])
    light = pytester.runpytest_subprocess("-v", "-p", "no:randomly", "-m", "not heavy", "notebooks")
    light.assert_outcomes(passed=2, deselected=2)
    # as `make test` runs it: two workers, whose node ids carry their xdist group
    both = pytester.runpytest_subprocess("-v", "-p", "randomly", "-n", "2", "--dist", "loadgroup", "notebooks")
    both.assert_outcomes(passed=3)
    assert not [line for line in both.outlines if "test_notebook_executes[03_a]" in line]
    grouped = {line.split("::")[1].split()[0] for line in both.outlines if "PASSED" in line and f"@{DEFAULTS_GROUP}" in line}
    assert grouped == {f"test_committed_defaults_write_no_stderr[05_audit_your_own_model]@{DEFAULTS_GROUP}"}, both.outlines


IN_ORDER = """
import os
import time

import pytest


def started(name):
    with open(os.environ["START_LOG"], "a") as f:
        f.write(name + "\\n")
    time.sleep(0.3)


@pytest.fixture(scope="module")
def shared():
    return 1


@pytest.mark.parametrize("i", range(5))
def test_many_short(shared, i):
    started(f"short-{i}")


@pytest.mark.heavy
def test_long():
    started("long")
"""


def test_the_longest_work_is_handed_out_first(pytester: pytest.Pytester, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist's own scheduler hands out the groups with the most tests first; `make test`'s hands them
    out in collection order, where the heavy tests come first: with two workers, the heavy test starts at
    once, beside a group of five short tests that share a module fixture."""
    _suite(pytester)
    pytester.makepyfile(test_in_order_probe=IN_ORDER)
    pytester.makepyfile(test_in_order_probe_b=IN_ORDER.replace("short-", "other-").replace('"long"', '"long-b"'))
    log = tmp_path / "started.log"
    monkeypatch.setenv("START_LOG", str(log))
    result = pytester.runpytest_subprocess("-p", "randomly", "-n", "2", "--dist", "loadgroup",
                                           "test_in_order_probe.py", "test_in_order_probe_b.py")
    result.assert_outcomes(passed=12)
    first = log.read_text().splitlines()[:2]
    assert sorted(first) == ["long", "long-b"], log.read_text()


THREADS_PROBE = """
import os
import subprocess
import sys


def test_report_threads():
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('OMP_NUM_THREADS', 'unset'))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    with open(os.environ["THREADS_LOG"], "a") as f:
        f.write(os.environ.get("OMP_NUM_THREADS", "unset") + " " + child + " "
                + os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "unset") + "\\n")
"""


def test_each_worker_and_its_processes_get_their_share_of_the_cores(pytester: pytest.Pytester, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers on this machine's CPUs: each worker, and what it starts, runs with its share as
    OMP_NUM_THREADS (PyTorch's threads and the workbench's ONNX Runtime sessions) and as torch.compile's
    compile workers (TORCHINDUCTOR_COMPILE_THREADS); one process leaves
    the runtimes their defaults; a value the user set is kept."""
    import os

    _suite(pytester)
    pytester.makepyfile(test_threads_probe=THREADS_PROBE)
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    for args, want in ((("-n", "2"), f"{share} {share} {share}"), ((), "unset unset unset")):
        log = tmp_path / f"threads{len(args)}.log"
        monkeypatch.setenv("THREADS_LOG", str(log))
        pytester.runpytest_subprocess("-p", "no:randomly", *args, "test_threads_probe.py").assert_outcomes(passed=1)
        assert log.read_text().split("\n")[0] == want, (args, log.read_text())
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    log = tmp_path / "kept.log"
    monkeypatch.setenv("THREADS_LOG", str(log))
    pytester.runpytest_subprocess("-p", "no:randomly", "-n", "2", "test_threads_probe.py").assert_outcomes(passed=1)
    assert log.read_text().strip().split()[:2] == ["7", "7"]
