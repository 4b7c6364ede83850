"""What every session holds, without a widget: results and their history, the run folder (given,
given as a function, or made once), one writer per run folder, stop and progress."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workbench.runs import RunLocked
from workbench.runs.lock import LOCK_FILE
from workbench.sessions.base import InputError, Session, check_data


def test_keep_makes_the_latest_result_and_adds_it_to_the_history_once() -> None:
    s = Session()
    first, second = {"n": 1}, {"n": 2}
    assert s.keep(first) is first and s.keep(first) is first  # the same object again: kept once
    s.keep(second)
    assert s.result is second and s.history == [first, second]


def test_run_dir_given_as_a_folder_a_function_or_made_once(tmp_path: Path, monkeypatch) -> None:
    assert Session(run_dir=tmp_path / "given").resolve_run_dir() == tmp_path / "given"
    assert Session(run_dir=lambda: tmp_path / "shared").resolve_run_dir() == tmp_path / "shared"
    import workbench.runs

    monkeypatch.setattr(workbench.runs, "DEFAULT_ROOT", tmp_path / "runs")  # where WORKBENCH_RUNS points
    made = Session()
    first = made.resolve_run_dir()
    assert first.parent == tmp_path / "runs" and made.resolve_run_dir() == first, "made once, kept for the session's life"


def test_writing_holds_the_run_folders_lock(tmp_path: Path) -> None:
    s = Session(run_dir=tmp_path / "run")
    with s.writing() as folder:
        assert folder == tmp_path / "run"
        assert "a notebook session" in (folder / LOCK_FILE).read_text()
    assert (tmp_path / "run" / LOCK_FILE).read_text() == "", "released: the lock file names nobody"


def test_a_second_writer_from_another_process_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom workbench.runs import run_lock\n"
         f"lock = run_lock({str(run)!r}, 'workbench quantize').acquire()\nprint('held', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLocked, match=r"workbench quantize.*pass another run_dir"):
            with Session(run_dir=run).writing():
                pass
    finally:
        holder.communicate("")
    with Session(run_dir=run).writing():  # free again once the other writer is gone
        pass


def test_stop_and_progress_reach_whoever_watches() -> None:
    seen = []
    s = Session(progress=lambda done, total, eta, detail: seen.append((done, total, eta, detail)))
    s.report(1, 4, None, "quantizing")
    s.stop()
    assert s.stop_event.is_set() and seen == [(1, 4, None, "quantizing")]
    s.start()
    assert not s.stop_event.is_set()
    Session().report(1, 2)  # nobody watches: nothing happens


def test_bad_data_is_refused_naming_what_is_allowed() -> None:
    with pytest.raises(TypeError, match="data must be a workbench.data.load.DataConfig or a datasets.DatasetDict, got int"):
        check_data(3)
    assert issubclass(InputError, ValueError)
