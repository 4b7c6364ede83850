"""How long each notebook of the workshop's hour takes on this machine under a learner's load
(``python scripts/agenda_times.py``): the times docs/workshop.md shows.

For each notebook of ``workbench.teaching.agenda.AGENDA``, in order, with the agenda's settings: JupyterLab
(127.0.0.1, a temporary HOME, a copy of ``notebooks/``) runs it, driven by headless Chromium as a learner
would (Run > Run All Cells; the tour's steps pressed by ``RUN_ALL = True``), so JupyterLab, the browser
drawing every widget and figure, and the kernel share the cores, as on a laptop in the room. A last cell
added to the copy writes the kernel's CPU seconds and peak memory; the wall time runs from the click to
that cell. The workshop checkpoint is prepared first (``make workshop``), outside the timing.

The result (``--out``, default docs/workshop-times.json) holds the date, the machine (CPU, its flags,
cores), the load average around each notebook, the versions and, per notebook, its settings, wall
minutes, CPU minutes and peak memory. ``--write-page`` then puts its table into docs/workshop.md between
``<!-- agenda-times -->`` and ``<!-- /agenda-times -->`` (a test checks that the page shows the committed
JSON). Run it on a quiet 2-core machine: other work running meanwhile makes the times longer. Chromium:
``$WORKBENCH_CHROMIUM`` or ``/usr/bin/chromium`` (``make setup-test``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from helpers.labtools import CHROMIUM, CHROMIUM_ARGS, LabServer, set_parameters  # noqa: E402
from workbench.teaching.agenda import AGENDA, HOUR_MINUTES  # noqa: E402

RESULT = REPO / "docs" / "workshop-times.json"
PAGE = REPO / "docs" / "workshop.md"
BEGIN, END = "<!-- agenda-times -->", "<!-- /agenda-times -->"
AGENDA_BEGIN, AGENDA_END = "<!-- agenda -->", "<!-- /agenda -->"
PRESS_EVERY_STEP = {"00_tour": {"RUN_ALL": True}}  # the learner's button presses, made by the notebook itself
DONE = "AGENDA-TIMES-DONE"
NOTEBOOK_TIMEOUT_MS = 45 * 60_000  # a guard, not a budget
PLACEHOLDER = ("**Not measured yet.** Run `python scripts/agenda_times.py --write-page` on a quiet 2-core machine "
               "(JupyterLab and headless Chromium running, as in the room) and commit `docs/workshop-times.json` "
               "with this page.")


def measuring_cell(path: Path) -> str:
    """The last cell of each copy: the kernel's CPU seconds and peak memory into ``path``, then the sign."""
    return ("import json as _j, resource as _r\n"
            "_s, _c = _r.getrusage(_r.RUSAGE_SELF), _r.getrusage(_r.RUSAGE_CHILDREN)\n"
            f"open({str(path)!r}, 'w').write(_j.dumps({{'cpu_s': _s.ru_utime + _s.ru_stime + _c.ru_utime + _c.ru_stime, "
            "'peak_rss_mib': max(_s.ru_maxrss, _c.ru_maxrss) / 1024}))\n"
            f"print({DONE!r})")


def prepare_copy(root: Path, stem: str, parameters: dict[str, Any], runs: Path, measure: Path) -> None:
    import nbformat

    path = root / f"{stem}.ipynb"
    set_parameters(path, {**parameters, **PRESS_EVERY_STEP.get(stem, {}), "RUNS": str(runs)})
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(measuring_cell(measure), metadata={"tags": ["agenda-times"]}))
    nbformat.write(nb, path)


def time_notebook(page, url: str, stem: str, measure: Path) -> dict[str, Any]:
    """Open ``stem`` in JupyterLab, Run All Cells, wait for the measuring cell's sign (or an error)."""
    from playwright.sync_api import expect

    page.goto(f"{url}/lab/tree/{stem}.ipynb?reset")
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible()
    load_before = os.getloadavg()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    t0 = time.monotonic()
    page.get_by_text("Run All Cells", exact=True).click()
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    expect(page.get_by_text(DONE, exact=True).or_(errors).first).to_be_visible(timeout=NOTEBOOK_TIMEOUT_MS)
    seconds = time.monotonic() - t0
    if errors.count():
        raise SystemExit(f"agenda_times: {stem} failed or wrote to stderr: {errors.first.inner_text()[:2000]}")
    kernel = json.loads(measure.read_text())
    return {"wall_minutes": round(seconds / 60, 1), "cpu_minutes": round(kernel["cpu_s"] / 60, 1),
            "peak_memory_gib": round(kernel["peak_rss_mib"] / 1024, 1),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def shut_down_kernels(url: str) -> None:
    import urllib.request

    with urllib.request.urlopen(f"{url}/api/kernels", timeout=30) as r:
        kernels = json.load(r)
    for kernel in kernels:
        urllib.request.urlopen(urllib.request.Request(f"{url}/api/kernels/{kernel['id']}", method="DELETE"), timeout=30).close()


def run_agenda(tmp: Path, home: Path, only: list[str]) -> tuple[list[dict[str, Any]], str]:
    """Every agenda notebook (or those in ``only``) timed in one JupyterLab and one Chromium."""
    from playwright.sync_api import expect, sync_playwright

    root = tmp / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    slots = [s for s in AGENDA if s.notebook and (not only or s.notebook in only)]
    for slot in slots:
        prepare_copy(root, slot.notebook, slot.parameters, tmp / "runs", tmp / f"{slot.notebook}.measure.json")
    lab_home = tmp / "lab-home"
    lab_home.mkdir()
    server = LabServer(root, lab_home, tmp / "jupyterlab.log", {"WORKBENCH_RUNS": str(tmp / "runs"), "WORKBENCH_HOME": str(home)})
    rows = []
    try:
        server.wait_ready()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            expect.set_options(timeout=180_000)
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.set_default_timeout(180_000)
            for slot in slots:
                shut_down_kernels(server.url)  # one notebook's kernel at a time, as a learner closes the last one
                print(f"agenda_times: {slot.notebook} ({slot.minutes} min in the agenda) ...", flush=True)
                row = {"notebook": slot.notebook, "agenda_minutes": slot.minutes, "parameters": slot.parameters,
                       **time_notebook(page, server.url, slot.notebook, tmp / f"{slot.notebook}.measure.json")}
                print(f"agenda_times: {slot.notebook}: {row['wall_minutes']} min wall, {row['cpu_minutes']} CPU min, "
                      f"{row['peak_memory_gib']} GiB", flush=True)
                rows.append(row)
            chromium = browser.version
            browser.close()
    finally:
        server.stop()
    return rows, chromium


def machine() -> dict[str, Any]:
    from workbench.perf.machine_profile import machine_profile

    profile = machine_profile()
    return {"cpu": profile.cpu_model, "isa": profile.isa_text(), "flags": profile.flags, "cores": profile.cores,
            "threads": profile.threads, "int8_over_fp32": round(profile.int8_over_fp32, 2),
            "os": platform.platform(), "python": platform.python_version()}


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {name: version(name) for name in ("torch", "onnxruntime-training-cpu", "transformers", "jupyterlab", "ipywidgets")}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    return {**out, "commit": commit or "unknown"}


def table(result: dict[str, Any] | None) -> str:
    """The page's block: the measured table, or the placeholder when nothing was measured."""
    if result is None:
        return PLACEHOLDER
    m = result["machine"]
    missing = [s.notebook for s in AGENDA if s.notebook and s.notebook not in {r["notebook"] for r in result["notebooks"]}]
    lines = [f"Measured {result['date']} on {m['cpu']} ({m['isa']}; {m['cores']} cores), {m['os']}, Chromium "
             f"{result['chromium']}, commit {result['versions']['commit']} (`docs/workshop-times.json`):", "",
             "| notebook | minutes in the agenda | minutes to run (wall, under load) | CPU minutes | peak memory | load average before |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in result["notebooks"]:
        lines.append(f"| `{r['notebook']}` | {r['agenda_minutes']} | {r['wall_minutes']} | {r['cpu_minutes']} | "
                     f"{r['peak_memory_gib']} GiB | {r['load_average_before'][0]} |")
    if missing:
        lines += ["", f"Not measured in that run: {', '.join(f'`{n}`' for n in missing)}."]
    return "\n".join(lines)


def agenda_table() -> str:
    """The page's agenda: ``AGENDA`` as a table, with each slot's clock time and settings."""
    lines = ["| time | notebook | settings (in its parameters cell) | what | why these settings |",
             "| --- | --- | --- | --- | --- |"]
    start = 0
    for slot in AGENDA:
        settings = ", ".join(f"`{k} = {v!r}`" for k, v in slot.parameters.items()) or ("as committed" if slot.notebook else "")
        notebook = f"`{slot.notebook}`" if slot.notebook else ""
        lines.append(f"| {start // 60}:{start % 60:02d}-{(start + slot.minutes) // 60}:{(start + slot.minutes) % 60:02d} | "
                     f"{notebook} | {settings} | {slot.title} | {slot.why} |")
        start += slot.minutes
    return "\n".join(lines)


def _between(text: str, begin: str, end: str, block: str) -> str:
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[:start] + "\n" + block + "\n" + text[stop:]


def page_with(text: str, result: dict[str, Any] | None) -> str:
    """``text`` (the page) with its agenda block from ``AGENDA`` and its times block from ``result``."""
    return _between(_between(text, AGENDA_BEGIN, AGENDA_END, agenda_table()), BEGIN, END, table(result))


def load_result(path: Path = RESULT) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(RESULT), help="the result JSON (default docs/workshop-times.json)")
    parser.add_argument("--only", nargs="*", default=[], help="time only these agenda notebooks (their stems)")
    parser.add_argument("--write-page", action="store_true", help="then write the agenda and the times into docs/workshop.md")
    parser.add_argument("--page-only", action="store_true", help="only write docs/workshop.md's blocks again, from AGENDA "
                                                                  "and the committed docs/workshop-times.json (runs nothing)")
    args = parser.parse_args(argv)
    known = [s.notebook for s in AGENDA if s.notebook]
    unknown = [n for n in args.only if n not in known]
    if unknown:
        parser.exit(2, f"agenda_times: --only {' '.join(unknown)}: not in the agenda; use some of {', '.join(known)}\n")
    if args.page_only:
        write_atomically(PAGE, page_with(PAGE.read_text(), load_result()))
        print(f"agenda_times: {PAGE} written again from the agenda and {RESULT.name if RESULT.is_file() else 'no times yet'}")
        return 0
    if not CHROMIUM.exists():
        parser.exit(2, f"agenda_times: no chromium at {CHROMIUM}: run make setup-test (Debian's chromium) or set WORKBENCH_CHROMIUM\n")
    from workbench.teaching.workshop import ensure_finetuned, workbench_home

    print("agenda_times: the workshop checkpoint first (make workshop; outside the timing)", flush=True)
    ensure_finetuned("minilm")
    with tempfile.TemporaryDirectory(prefix="wb-agenda-") as t:
        rows, chromium = run_agenda(Path(t), workbench_home(), args.only)
    result = {"made_by": "python scripts/agenda_times.py", "date": dt.date.today().isoformat(),
              "measured_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "hour_minutes": HOUR_MINUTES, "machine": machine(), "versions": versions(), "chromium": chromium,
              "notebooks": rows}
    out = Path(args.out)
    write_atomically(out, json.dumps(result, indent=1) + "\n")
    print(f"agenda_times: {out}")
    if args.write_page:
        write_atomically(PAGE, page_with(PAGE.read_text(), result))
        print(f"agenda_times: the table in {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
