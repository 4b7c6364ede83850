"""The one stage sequencer (workbench.flow.sequence): order, hand-offs by name, failures recorded, skip
reasons, stop, resume, the report stage at the end, progress."""

from __future__ import annotations

import threading

import pytest

from workbench.flow.sequence import Stage, run_stages


def _stages(calls: list, fail: str = "", stop_after: str = "", stop: threading.Event | None = None):
    def make(name, value):
        def run(rec):
            calls.append(name)
            if name == stop_after and stop is not None:
                stop.set()
            if name == fail:
                rec.headline["tried"] = "yes"
                raise RuntimeError(f"{name} broke\nsecond line")
            return value
        return run

    return [
        Stage("a", make("a", 1)),
        Stage("b", make("b", 2), needs=("a",)),
        Stage("c", make("c", 3), needs=("b",)),
        Stage("d", make("d", 4), needs=("a",)),
        Stage("report", make("report", "page"), finally_=True),
    ]


def test_stages_run_in_order_and_hand_on_by_name() -> None:
    calls, lines, progress = [], [], []
    done = run_stages(_stages(calls), log=lines.append, on_stage=lambda i, n, name, st: progress.append((i, n, name, st)))
    assert calls == ["a", "b", "c", "d", "report"]
    assert done.results == {"a": 1, "b": 2, "c": 3, "d": 4, "report": "page"}
    assert [o.status for o in done.outcomes] == ["ok"] * 5 and done.ok
    assert progress[:2] == [(1, 5, "a", "running"), (1, 5, "a", "ok")] and progress[-1] == (5, 5, "report", "ok")
    assert "\n== c ==" in lines and "   c: ok in" in next(x for x in lines if x.startswith("   c:"))


def test_a_failure_is_recorded_and_only_what_needs_it_is_skipped() -> None:
    calls, lines = [], []
    done = run_stages(_stages(calls, fail="b"), log=lines.append, style="steps")
    assert calls == ["a", "b", "d", "report"]  # c needs b; d and the report do not
    status = {o.name: o.status for o in done.outcomes}
    assert status == {"a": "ok", "b": "failed", "c": "skipped", "d": "ok", "report": "ok"}
    assert done.outcome("b").message == "RuntimeError: b broke" and done.outcome("b").headline == {"tried": "yes"}
    assert done.outcome("c").message == "needs the b result (b failed: RuntimeError: b broke)"
    assert "[3/5] c ..." in "\n".join(lines) and any("b: FAILED after" in x for x in lines)
    assert not done.ok


def test_a_failed_stage_can_still_hand_on_what_it_finished() -> None:
    def fine_tune(rec):
        rec.partial = "eager checkpoint"
        raise RuntimeError("ortmodule failed")

    done = run_stages([Stage("fine-tune", fine_tune), Stage("export", lambda rec: "exported", needs=("fine-tune",))],
                      log=lambda _: None)
    assert [o.status for o in done.outcomes] == ["failed", "ok"]
    assert done.results["fine-tune"] == "eager checkpoint"


def test_stop_ends_between_stages_and_the_report_still_runs() -> None:
    calls, stop = [], threading.Event()
    done = run_stages(_stages(calls, stop_after="b", stop=stop), log=lambda _: None, stop=stop)
    assert calls == ["a", "b", "report"]
    assert [o.status for o in done.outcomes] == ["ok", "ok", "stopped", "stopped", "ok"] and done.stopped


def test_fail_fast_stops_at_the_first_failure_but_runs_the_final_stage() -> None:
    calls = []
    done = run_stages(_stages(calls, fail="a"), log=lambda _: None, fail_fast=True)
    assert calls == ["a", "report"]
    assert [o.status for o in done.outcomes] == ["failed", "skipped", "skipped", "skipped", "ok"]


def test_resume_keeps_a_saved_result_and_later_stages_take_it() -> None:
    calls = []
    stages = [Stage("export", lambda rec: calls.append("export") or "new", resume=lambda: "saved"),
              Stage("fuse", lambda rec: calls.append("fuse") or None, resume=lambda: None),
              Stage("quantize", lambda rec: "q", needs=("export",))]
    done = run_stages(stages, log=lambda _: None, resume=True)
    assert calls == ["fuse"] and done.results["export"] == "saved"
    assert [o.status for o in done.outcomes] == ["resumed", "ok", "ok"]
    again = run_stages(stages, log=lambda _: None)  # without resume everything runs
    assert again.results["export"] == "new"


def test_fatal_errors_propagate() -> None:
    class BadInput(ValueError):
        pass

    def bad(rec):
        raise BadInput("--max-length 1000 is more than the model's 512 positions")

    with pytest.raises(BadInput):
        run_stages([Stage("data", bad)], log=lambda _: None, fatal=(BadInput,))


def test_needs_must_name_earlier_stages() -> None:
    with pytest.raises(ValueError, match="needs \\['later'\\]"):
        run_stages([Stage("a", lambda r: 1, needs=("later",)), Stage("later", lambda r: 2)], log=lambda _: None)
    with pytest.raises(ValueError, match="unique"):
        run_stages([Stage("a", lambda r: 1), Stage("a", lambda r: 2)], log=lambda _: None)


def test_every_front_sequences_through_run_stages() -> None:
    """The demo, the audit, the notebook Workbench and the coverage each give run_stages their list;
    none keeps a step type or a hand-written order of its own."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    fronts = {"workbench/workflows/demo.py": "run_demo", "workbench/audit/stage.py": "run_audit",
              "widgets/workbench.py": "run_all", "workbench/workflows/coverage.py": "run_coverage"}
    for rel, func in fronts.items():
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func)
        calls = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "run_stages" in calls, f"{rel}:{func} does not sequence through run_stages"
        classes = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and hasattr(n, "body")
                   and any(isinstance(b, ast.FunctionDef) and b.name == "__exit__" for b in n.body)]
        assert not classes, f"{rel} keeps its own step type(s) {classes}"
