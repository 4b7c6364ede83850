"""The workshop page (docs/workshop.md) says what the code does: its agenda block is
``workbench.teaching.agenda.AGENDA``, its times block is the committed docs/workshop-times.json (or the
placeholder while none is committed), each slot's settings are parameters its notebook declares, the
hour adds up, and its answer table names every exercise of the key."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import yaml

from workbench.teaching.agenda import AGENDA, HOUR_MINUTES
from workbench.teaching.answers import KEY

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "workshop.md"
SCRIPT = REPO / "scripts" / "agenda_times.py"


def _script():
    spec = importlib.util.spec_from_file_location("agenda_times_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_the_agenda_and_the_committed_times() -> None:
    script = _script()
    text = PAGE.read_text()
    assert script.page_with(text, script.load_result()) == text, (
        "docs/workshop.md's agenda or times block is stale: python scripts/agenda_times.py --page-only")
    if script.load_result() is None:
        assert "Not measured yet" in text


def test_the_times_table_is_made_from_the_json_and_names_what_was_not_measured() -> None:
    script = _script()
    row = {"notebook": "03_export_and_fusion", "agenda_minutes": 8, "parameters": {}, "wall_minutes": 2.4, "cpu_minutes": 0.6,
           "peak_memory_gib": 2.4, "load_average_before": [0.4, 0.5, 0.6], "load_average_after": [1.0, 0.6, 0.6]}
    result = {"date": "2026-11-28", "chromium": "156.0", "versions": {"commit": "abc1234"}, "notebooks": [row],
              "machine": {"cpu": "test CPU", "isa": "AVX2", "cores": 2, "os": "Linux"}}
    block = script.table(result)
    assert "| `03_export_and_fusion` | 8 | 2.4 | 0.6 | 2.4 GiB | 0.4 |" in block and "test CPU" in block
    assert "Not measured in that run: `00_tour`, `02_eager_vs_ortmodule`, `04_quantization_drift`." in block
    assert script.table(None) == script.PLACEHOLDER
    page = script.page_with(PAGE.read_text(), result)
    assert block in page and script.PLACEHOLDER not in page


def test_the_hour_adds_up_and_every_setting_is_a_parameter_of_its_notebook() -> None:
    assert sum(slot.minutes for slot in AGENDA) == HOUR_MINUTES
    notebooks = [slot.notebook for slot in AGENDA if slot.notebook]
    assert notebooks == sorted(notebooks), "the lessons in the notebooks' order"
    for slot in AGENDA:
        if not slot.notebook:
            assert not slot.parameters
            continue
        nb = json.loads((REPO / "notebooks" / f"{slot.notebook}.ipynb").read_text())
        cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
        declared = {line.split("=")[0].strip() for line in "".join(cell["source"]).splitlines() if "=" in line}
        assert set(slot.parameters) <= declared, (slot.notebook, set(slot.parameters) - declared)


def test_the_page_is_in_the_site_and_names_every_exercise_of_the_key() -> None:
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    assert {"Running a workshop": "workshop.md"} in nav
    text = PAGE.read_text()
    for notebook, exercise in KEY.items():
        assert f"| `{notebook}` | `{exercise.variable}` |" in text, notebook


def test_agenda_times_refuses_a_notebook_outside_the_agenda() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "05_audit_your_own_model"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--only 05_audit_your_own_model" in done.stderr and "not in the agenda" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
