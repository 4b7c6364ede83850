"""What ``make screenshots`` (scripts/screenshots.py) writes beside its pictures, from the run's own files: the
facts of the run the pictures show (the model, the machine from its machine profile, the date), the check that the
run is one the README may show, each picture's caption, and the README's picture block. No figure or machine name
here is typed by hand: each comes from ``summary.json`` and ``demo.json`` of the run folder.

``tests/repo/test_docs.py`` reads the README's block back and compares it with :func:`readme_block` of
``docs/img/manifest.json``, so the captions cannot drift from the pictures.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

# the README's picture block: between these two lines, written by make screenshots
README_START = "<!-- pictures: written by make screenshots (scripts/picture_captions.py) from the run's files -->"
README_END = "<!-- /pictures -->"
# the README's pictures in order, with their width and where they sit in the caption
README_PICTURES = (("workbench-lab.png", "49%", "Left"), ("report.png", "49%", "Right"), ("report-slices.png", "98%", "Below"))
MODEL_NAMES = {"minilm": "all-MiniLM-L6-v2", "tiny": "the tiny test model (a random 2-layer BERT)"}
LIKE_FOR_LIKE = "like for like (steps taken in turns)"
ONE_AFTER_THE_OTHER = "one after the other, not like for like"


class RunRefused(ValueError):
    """A run folder the README's pictures may not be made from; the message says why and what to do."""


@dataclass(frozen=True)
class RunFacts:
    """The run the pictures show, in the words the captions use."""

    run: str  # the run folder's name
    date: str  # the day its report was written (UTC), YYYY-MM-DD
    written_utc: str  # summary.json's created_utc
    model: str  # the model in words
    quick: bool  # the tiny model's smoke run (workbench demo --quick)
    machine: str  # CPU model, instruction sets and CPUs, from the run's machine profile
    training: str  # which figure the training verdict is: LIKE_FOR_LIKE, ONE_AFTER_THE_OTHER, or "" (no ORTModule ratio)
    contended: list[str]  # why speed figures were taken under load ([] on a quiet machine)

    def as_dict(self) -> dict:
        return asdict(self)


def _json(path: Path) -> dict:
    if not path.is_file():
        raise RunRefused(f"{path} does not exist: --run takes a folder `workbench demo` wrote (runs/<time>-demo)")
    return json.loads(path.read_text())


def run_facts(run: Path) -> RunFacts:
    """The facts of ``run`` (a folder ``workbench demo`` wrote) from its summary.json and demo.json."""
    summary, demo = _json(run / "summary.json"), _json(run / "demo.json")
    if not (run / "report.html").is_file():
        raise RunRefused(f"{run} has no report.html: the demo stopped before its report; make the demo again")
    model = str(((demo.get("config") or {}).get("train") or {}).get("model", ""))
    m = summary.get("machine") or {}
    if not m.get("cpu_model"):
        raise RunRefused(f"{run}/summary.json records no machine profile: make the demo again (its report records one)")
    machine = f"{m['cpu_model']} ({m.get('isa', 'instruction sets not recorded')}), {m.get('cores', '?')} CPUs"
    verdicts = {v["backend"]: v for v in ((summary.get("training") or {}).get("verdicts") or [])}
    ort = verdicts.get("ortmodule")
    training = "" if ort is None or ort.get("ratio") is None else (LIKE_FOR_LIKE if ort.get("interleaved") else ONE_AFTER_THE_OTHER)
    contended = list(summary.get("contended_because") or [])
    contended += [f"training: {v['load']}" for v in verdicts.values() if v.get("outcome") == "unmeasured"]
    written = str(summary.get("created_utc", ""))
    return RunFacts(run=run.name, date=written[:10], written_utc=written, model=MODEL_NAMES.get(model, model),
                    quick=model == "tiny", machine=machine, training=training, contended=contended)


def refusal(facts: RunFacts, summary: dict) -> Optional[str]:
    """Why the README may not show this run (None: it may): the tiny model, speed figures taken under load, a
    fine-tune timed one after the other, slices without a real interval."""
    if facts.quick:
        return (f"{facts.run} is a run of the tiny test model (workbench demo --quick): the README shows MiniLM; make the "
                "demo with `make demo` and give --run that folder")
    if facts.contended:
        return (f"{facts.run}'s speed figures were taken while other work used the CPU ({'; '.join(facts.contended)[:300]}): "
                "make the demo again on a quiet machine")
    if facts.training != LIKE_FOR_LIKE:
        return (f"{facts.run}'s fine-tune has no like-for-like ORTModule figure (it is {facts.training or 'missing'}): "
                "the demo takes turns by default (isolate); make it again without turning that off")
    widths = [s["ci95"][1] - s["ci95"][0] for q in summary.get("quantization", []) for s in [q["overall"], *q["slices"]]
              if s.get("ci95") and None not in s["ci95"]]
    if not any(w > 0 for w in widths):
        return f"{facts.run}: no slice of any variant has an interval wider than zero: nothing for the slice chart to show"
    return None


def caption(shows: str, facts: RunFacts) -> str:
    """A picture of the run: what it shows, then the run (model, date) and the machine it ran on."""
    return f"{shows}; from `workbench demo` on {facts.model}, run {facts.run} of {facts.date}, on {facts.machine}"


def notebook_caption(shows: str, parameters: dict, machine: str, date: str) -> str:
    """A notebook's picture: run at the time of the shot with small parameters, on this machine."""
    given = ", ".join(f"{k}={v}" for k, v in parameters.items())
    return f"{shows}; run with small parameters ({given}) by make screenshots on {date}, on {machine}"


def this_machine() -> str:
    """The machine the notebooks run on at the time of the shot: CPU model, instruction sets, CPUs (the words of
    the machine profile, read from /proc/cpuinfo without measuring)."""
    from types import SimpleNamespace

    from workbench.perf.machine_profile import MachineProfile, cpu_model_and_flags, usable_cpus

    model, flags = cpu_model_and_flags()
    return f"{model or 'an unnamed CPU'} ({MachineProfile.isa_text(SimpleNamespace(flags=flags))}), {usable_cpus()} CPUs"


README_SHOWS = {
    "workbench-lab.png": "JupyterLab, notebook 00_tour with the run opened: the fine-tune step, the loss curves of eager "
                         "PyTorch and ORTModule and the training verdict ({training})",
    "report.png": "report.html: the verdict, then the quantization table (the sections between them folded away)",
    "report-slices.png": "report.html: the accuracy change by slice against FP32, each slice with its 95% paired "
                         "bootstrap interval",
}


def readme_shows(name: str, facts: RunFacts) -> str:
    return README_SHOWS[name].format(training=facts.training or "no ORTModule figure")


def readme_block(manifest: dict) -> str:
    """The README's picture block, from the manifest alone (its run's facts and its pictures' captions)."""
    facts = RunFacts(**manifest["run_facts"])
    imgs, said = [], []
    for name, width, where in README_PICTURES:
        alt = html.escape(manifest["images"][name]["caption"], quote=True)
        imgs.append(f'<img src="docs/img/{name}" width="{width}" alt="{alt}">')
        said.append(f"{where}: {readme_shows(name, facts)}.")
    return "\n".join([
        README_START, "<p>", imgs[0], imgs[1], "</p>", f"<p>{imgs[2]}</p>", "",
        f"*Made by `make screenshots` from `workbench demo` on {facts.model}, run {facts.run} of {facts.date}, on "
        f"{facts.machine}. " + " ".join(said) + "*", README_END])


def readme_block_in(text: str) -> Optional[str]:
    """The picture block a README holds (its two marker lines included); None when it has none."""
    if README_START not in text or README_END not in text:
        return None
    start = text.index(README_START)
    return text[start:text.index(README_END, start) + len(README_END)]


def with_readme_block(text: str, block: str) -> str:
    """``text`` (a README) with its picture block replaced by ``block``."""
    old = readme_block_in(text)
    if old is None:
        raise RunRefused(f"README.md has no picture block: put the two lines {README_START!r} and {README_END!r} where the "
                         "pictures go")
    return text.replace(old, block)
