"""Figures the README and the documentation quote, each from one source: a committed result file in
benchmarks/results/ (a measurement, with its machine and date) or the code itself (a setting: a default, a
budget, the number of notebooks).

A page holds a figure between markers, its text generated and committed, so it reads the same on the
repository as on the site; ``python docs/hooks/generated.py`` writes every page's figures again, and a test
(tests/repo/test_figures.py) fails when a committed figure is not what its source says:

- ``<!-- figure: NAME -->TEXT<!-- /figure -->``: one figure inside a sentence (``FIGURES[NAME]``); a name may end
  in ``|word`` or ``|Word`` (a count in words: ``eight``, ``Eight``).
- ``<!-- results-table: NAME -->`` ... ``<!-- /results-table -->``: a whole table (``TABLES[NAME]``), lines of
  its own.

Each entry names its source (``Figure.source``): a path relative to the repository, or ``code:MODULE:NAME``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[2]
RESULTS = "benchmarks/results"
EMBED = f"{RESULTS}/embed_minilm_epyc-avx2_2026-11-25.json"
TRAIN_MINILM = f"{RESULTS}/train_minilm_epyc-avx2_2026-11-25.json"
TEST_SUITE = f"{RESULTS}/test_suite_epyc-avx2_2026-11-28.json"
DISK = f"{RESULTS}/stacks_disk_epyc-avx2_2026-11-26.json"
DEMO = f"{RESULTS}/demo_minilm_epyc-avx2_2026-11-25.json"
# what benchmarks/classifier_result.py writes from a demo run's summary.json; the newest one is quoted
CLASSIFIER_GLOB = f"{RESULTS}/classifier_minilm_*.json"
# what benchmarks/bench_scale.py writes (engine local against ray, the load runs); the newest one is quoted
SCALE_GLOB = f"{RESULTS}/scale_minilm_*.json"

FIGURE = re.compile(r"<!-- figure: ([\w.|-]+) -->(.*?)<!-- /figure -->", re.S)
TABLE = re.compile(r"(<!-- results-table: ([\w.-]+) -->\n)(.*?)(<!-- /results-table -->)", re.S)
WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


class FigureError(ValueError):
    """A marker that names no known figure, or a source that cannot be read."""


@dataclass(frozen=True)
class Figure:
    """One quoted figure: where it comes from, and how its text is made from that source (``text(source)``,
    the source loaded by ``load``: a result file's JSON, the object a ``code:`` source names, or the list of
    files a glob matches)."""

    source: str
    text: Callable[[Any], str]


def load(source: str) -> Any:
    if source.startswith("code:"):
        module, _, name = source[5:].partition(":")
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj
    if any(c in source for c in "*?["):
        return sorted(REPO.glob(source))
    path = REPO / source
    if not path.exists():
        raise FigureError(f"{source} does not exist")
    return json.loads(path.read_text()) if path.suffix == ".json" else path.read_text()


def default(cls: Any, name: str) -> Any:
    """A config dataclass field's default."""
    (f,) = [f for f in dataclasses.fields(cls) if f.name == name]
    return f.default


def points(fraction: float) -> str:
    return f"{100 * fraction:g}"


def ratio(x: float) -> str:
    return f"{x:.2f}x"


def span(lo: float, hi: float) -> str:
    return f"{lo:.2f}-{hi:.2f}x"


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(round(seconds % 60))} s"


def about_minutes(seconds: float) -> str:
    """To the nearest 5 minutes (at least 5)."""
    return f"about {max(5, 5 * round(seconds / 300))} min"


# --- the embedding benchmark (benchmarks/bench_embed.py's JSON) ---

def embed_speed(d: dict, name: str, batch: int) -> dict:
    (row,) = [s for s in d["speed"]["speeds"] if s["name"] == name and s["batch"] == batch]
    return row


def embed_quality(d: dict, name: str) -> dict:
    (v,) = [v for v in d["quality"]["variants"] if v["name"] == name]
    return v


def embed_ndcg_change(d: dict, name: str) -> float:
    return embed_quality(d, name)["retrieval"]["slices"][0]["delta"]["ndcg@10"]["value"]


def embed_share(d: dict, name: str) -> float:
    return embed_quality(d, name)["retrieval"]["slices"][0]["variant"]["ndcg@10"] / d["quality"]["fp32_metrics"]["ndcg@10"]


def embed_count(d: dict, what: str) -> int:
    found = re.search(rf"(\d+) {what}", d["task"])
    if found is None:
        raise FigureError(f"{EMBED}: its task does not say how many {what}")
    return int(found[1])


# --- the training benchmark (benchmarks/bench_train.py's JSON) ---

def tuned_ratios(d: dict) -> list[float]:
    """The tuned ORTModule's speed against eager with the same settings, at every shape."""
    return [r["speed_vs_baseline"] for r in d["interleaved"]
            if r["variant"] == "ort-opset14-fused-no-spin" and r["comparison"] == "backend"]


def two_threads_run(d: dict) -> str:
    (e,) = [e for e in d["earlier"] if "two threads per worker" in e["note"]]
    return (f"{minutes(e['total_s'])} on {e['date']} (training stack {minutes(e['training_stack']['seconds'])}, "
            f"current stack {minutes(e['current_stack']['seconds'])})")


def presets_words(presets: tuple) -> str:
    return ", ".join(f"`{p}`" for p in presets[:-1]) + f" and `{presets[-1]}`"


def _settings() -> dict[str, Figure]:
    audit, embed = "code:workbench.audit.config:AuditConfig", "code:workbench.embed.audit:EmbedAuditConfig"
    return {
        "audit.presets": Figure(audit, lambda c: presets_words(default(c, "presets"))),
        "demo.presets": Figure("code:workbench.workflows.demo:DemoConfig", lambda c: presets_words(default(c, "quant_presets"))),
        "audit.budget_overall.points": Figure(audit, lambda c: points(default(c, "budget_overall"))),
        "audit.budget_slice.points": Figure(audit, lambda c: points(default(c, "budget_slice"))),
        "audit.min_speedup": Figure(audit, lambda c: f"{default(c, 'min_speedup'):g}"),
        "audit.calibration_size": Figure(audit, lambda c: str(default(c, "calibration_size"))),
        "audit.ray_threads": Figure(audit, lambda c: str(default(c, "ray_threads"))),
        "audit.min_slice_size": Figure("code:workbench.quant.evaluate:MIN_SLICE_SIZE", str),
        "embed.min_ndcg_ratio": Figure(embed, lambda c: f"{default(c, 'min_ndcg_ratio'):g}"),
        "embed.max_slice_drop": Figure(embed, lambda c: f"{default(c, 'max_slice_drop'):g}"),
        "embed.min_slice_size": Figure(embed, lambda c: str(default(c, "min_slice_size"))),
        "embed.min_speedup": Figure(embed, lambda c: f"{default(c, 'min_speedup'):g}"),
        "notebooks.count": Figure("notebooks/*.ipynb", lambda paths: str(len(paths))),
        "notebooks.last": Figure("notebooks/*.ipynb", lambda paths: paths[-1].stem),
    }


def _measured() -> dict[str, Figure]:
    best = "dynamic-per-channel+exclude3"
    return {
        "embed.best.b1": Figure(EMBED, lambda d: ratio(embed_speed(d, d["targets"]["best"], 1)["speedup"])),
        "embed.best.b1.interval": Figure(EMBED, lambda d: span(embed_speed(d, d["targets"]["best"], 1)["lo"],
                                                               embed_speed(d, d["targets"]["best"], 1)["hi"])),
        "embed.best.b32": Figure(EMBED, lambda d: ratio(embed_speed(d, best, 32)["speedup"])),
        "embed.tokens": Figure(EMBED, lambda d: str(d["speed"]["speeds"][0]["tokens"])),
        "embed.threads": Figure(EMBED, lambda d: str(d["threads"])),
        "embed.queries": Figure(EMBED, lambda d: f"{embed_count(d, 'queries'):,}"),
        "embed.reviews": Figure(EMBED, lambda d: f"{embed_count(d, 'reviews'):,}"),
        "embed.encode_ms.b1": Figure(EMBED, lambda d: f"{embed_speed(d, d['speed']['base'], 1)['ms_per_text']:.1f}"),
        "embed.encode_ms.b32": Figure(EMBED, lambda d: f"{embed_speed(d, d['speed']['base'], 32)['ms_per_text']:.2f}"),
        "embed.fp32_ndcg": Figure(EMBED, lambda d: f"{d['quality']['fp32_metrics']['ndcg@10']:.4f}"),
        "embed.load": Figure(EMBED, lambda d: d["speed"]["load"]),
        "train.minilm.tuned.range": Figure(TRAIN_MINILM, lambda d: f"{min(tuned_ratios(d)):.2f}x to {max(tuned_ratios(d)):.2f}x"),
        "test_suite.about": Figure(TEST_SUITE, lambda d: about_minutes(d["total_s"])),
        "test_suite.total": Figure(TEST_SUITE, lambda d: minutes(d["total_s"])),
        "test_suite.setup": Figure(TEST_SUITE, lambda d: minutes(d["setup_s"])),
        "test_suite.training": Figure(TEST_SUITE, lambda d: minutes(d["training_stack"]["seconds"])),
        "test_suite.current": Figure(TEST_SUITE, lambda d: minutes(d["current_stack"]["seconds"])),
        "test_suite.training.counts": Figure(TEST_SUITE, lambda d: "{passed:,} passed, {skipped} skipped".format(**d["training_stack"])
                                             + (f", {d['training_stack']['failed']} failed" if d["training_stack"].get("failed") else "")),
        "test_suite.current.counts": Figure(TEST_SUITE, lambda d: "{passed:,} passed, {skipped} skipped".format(**d["current_stack"])),
        "test_suite.date": Figure(TEST_SUITE, lambda d: d["date"]),
        "test_suite.window": Figure(TEST_SUITE, lambda d: f"{d['date']}, {d['window_utc']} UTC"),
        "disk.training": Figure(DISK, lambda d: f"{d['training_stack']['gib']:g} GiB"),
        "disk.training.cuda": Figure(DISK, lambda d: f"{d['training_stack']['cuda_libraries_gib']:g} GiB"),
        "disk.current.cpu": Figure(DISK, lambda d: f"{d['current_stack_cpu_torch']['gib']:g} GiB"),
        "disk.current.cuda": Figure(DISK, lambda d: f"{d['current_stack_cuda_torch']['gib']:g} GiB"),
        "disk.both.pypi": Figure(DISK, lambda d: f"{d['training_stack']['gib'] + d['current_stack_cuda_torch']['gib']:.1f} GiB"),
        "disk.current.cpu.setup": Figure(DISK, lambda d: minutes(d["current_stack_cpu_torch"]["setup_s"])),
        "disk.current.cuda.setup": Figure(DISK, lambda d: minutes(d["current_stack_cuda_torch"]["setup_s"])),
        "disk.migration": Figure(DISK, lambda d: "{setup_s} s, {cuda_libraries_removed_gib:g} GiB of CUDA libraries removed".format(
            **d["current_stack_from_previous_lock"])),
        "disk.noop": Figure(DISK, lambda d: f"{d['current_stack_nothing_to_do_s']} s"),
        "test_suite.earlier": Figure(TEST_SUITE, lambda d: "; ".join(
            f"{minutes(e['total_s'])} on {e['date']}" + (" with two threads per worker" if "two threads" in e["note"] else "")
            for e in d["earlier"])),
        "test_suite.two_threads": Figure(TEST_SUITE, lambda d: two_threads_run(d)),
        "demo.about": Figure(DEMO, lambda d: about_minutes(d["total_s"])),
        "demo.total": Figure(DEMO, lambda d: minutes(d["total_s"])),
        "demo.finetune_s": Figure(DEMO, lambda d: f"{d['stages_s']['fine-tune']} s"),
        "demo.ortmodule": Figure(DEMO, lambda d: "{value:.2f}x ({lo:.2f}-{hi:.2f})".format(**d["training"]["ortmodule_vs_eager"])),
        "demo.compile": Figure(DEMO, lambda d: "{value:.2f}x ({lo:.2f}-{hi:.2f})".format(**d["training"]["compile_vs_eager"])),
        "demo.accuracy": Figure(DEMO, lambda d: f"{d['test_accuracy']:.3f}"),
    }


FIGURES: dict[str, Figure] = {**_settings(), **_measured()}


def figure_text(name: str) -> str:
    """The text of the figure a marker names (``NAME`` or ``NAME|word`` / ``NAME|Word``)."""
    base, _, form = name.partition("|")
    if base not in FIGURES:
        raise FigureError(f"<!-- figure: {name} --> names no figure of docs/hooks/figures.py's FIGURES")
    fig = FIGURES[base]
    text = fig.text(load(fig.source))
    if form in ("word", "Word"):
        text = WORDS[int(text)] if int(text) < len(WORDS) else text
        text = text.capitalize() if form == "Word" else text
    elif form:
        raise FigureError(f"<!-- figure: {name} -->: unknown form {form!r} (word or Word)")
    return text


def with_figures(page: str) -> str:
    """``page`` with every figure and results table generated again from its source."""
    page = FIGURE.sub(lambda m: f"<!-- figure: {m[1]} -->{figure_text(m[1])}<!-- /figure -->", page)
    return TABLE.sub(lambda m: f"{m[1]}{table_text(m[2]).strip()}\n\n{m[4]}", page)


def pages() -> list[Path]:
    """Every page that may quote a figure: the README, the root's Markdown files, the notebooks' README
    and the documentation."""
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "ARCHITECTURE.md", REPO / "notebooks" / "README.md",
            *sorted((REPO / "docs").rglob("*.md"))]


def write_figures() -> list[Path]:
    """Write every page's figures again; the pages that changed."""
    changed = []
    for path in pages():
        old = path.read_text()
        new = with_figures(old)
        if new != old:
            path.write_text(new)
            changed.append(path)
    return changed


# --- tables ---

def cells(*row: Any) -> str:
    return "| " + " | ".join(str(c) for c in row) + " |"


def embed_rows(d: dict) -> list[list[str]]:
    """The at-a-glance rows of the embedding model: PyTorch, the fused FP32 graph, the fastest INT8 variant within
    the budget, sentence-transformers' own INT8 export (batch 1, the data's median length)."""
    best, anchor = d["targets"]["best"], "sentence-transformers INT8 ONNX"
    base = embed_speed(d, d["speed"]["base"], 1)
    rows = [["PyTorch eager (sentence-transformers `encode`)", f"1.00x ({base['ms_per_text']:.1f} ms a text)", "-", "the reference"]]
    for name, label in (("fused", "fused FP32 graph"), (best, f"INT8, the fastest within the budget: {variant_words(best)}"),
                        (anchor, f"sentence-transformers' own INT8 export ({d['anchor']['config']})")):
        s = embed_speed(d, name, 1)
        size = d["variants"].get(name, {}).get("size_mib")
        rows.append([label, f"{ratio(s['speedup'])} [{span(s['lo'], s['hi'])}]",
                     f"{size:.1f} MiB" if size else "not recorded",
                     f"NDCG@10 {embed_ndcg_change(d, name):+.4f} ({100 * embed_share(d, name):.2f}% of FP32's)"])
    return rows


def variant_words(name: str) -> str:
    """``dynamic-per-channel+exclude3`` as ``dynamic-per-channel, 3 worst nodes in FP32``."""
    preset, _, excluded = name.partition("+exclude")
    return f"`{preset}`" + (f", {excluded} worst nodes in FP32" if excluded else "")


def classifier_rows(d: dict) -> list[list[str]]:
    """The at-a-glance rows of the classifier, from what benchmarks/classifier_result.py wrote."""
    rows = []
    for r in d["rows"]:
        speed = f"{ratio(r['speed'])} {r['against']}"
        speed += f" [{span(r['lo'], r['hi'])}]" if r.get("lo") is not None else " (medians, no interval)"
        quality = "the reference" if r.get("accuracy_delta") is None else f"accuracy {100 * r['accuracy_delta']:+.2f} points"
        rows.append([r["variant"], f"{speed}, {r['shape']}", f"{r['size_mib']:.1f} MiB" if r.get("size_mib") else "", quality])
    return rows


def glance_table(classifier: Optional[list[Path]] = None) -> str:
    """The README's results at a glance: each model with a committed result file, on its named CPU and date, in
    one table (speed against PyTorch eager unless the cell names another reference)."""
    d = load(EMBED)
    captions = [f"Embedding model: all-MiniLM-L6-v2, batch 1, {d['speed']['speeds'][0]['tokens']} tokens (the data's "
                f"median), {d['threads']} threads, on {d['machine']['cpu_model']} ({d['speed']['cpu']}), {date_of(EMBED)}: "
                f"[{Path(EMBED).name}]({EMBED})."]
    rows = [["embedding", *embed_rows(d)[0]], *[["", *r] for r in embed_rows(d)[1:]]]
    found = load(CLASSIFIER_GLOB) if classifier is None else classifier
    if found:
        path = found[-1].relative_to(REPO).as_posix() if found[-1].is_relative_to(REPO) else str(found[-1])
        c = json.loads(found[-1].read_text())
        captions.append(f"Classifier: {c['model']}, `make demo`, {c['threads']} threads, on {c['machine']['cpu_model']} "
                        f"({c['machine']['isa']}), {c['date']}: [{Path(path).name}]({path}).")
        rows += [["classifier" if i == 0 else "", *r] for i, r in enumerate(classifier_rows(c))]
    head = [cells("model", "variant", "speed [95% interval]", "size", "quality change"), cells(*["---"] * 5)]
    return "\n".join([" ".join(captions), "", *head, *[cells(*r) for r in rows]])


def embed_variants_table() -> str:
    """docs/embeddings.md's table: every variant of the embedding benchmark, speed at both batch sizes, quality."""
    d = load(EMBED)
    rows = [cells("variant", "vs `encode`, batch 1 [95%]", "vs `encode`, batch 32 [95%]", "NDCG@10, share of FP32",
                  "worst slice drop", "within budget"), cells(*["---"] * 6)]
    for v in d["quality"]["variants"]:
        name = v["name"]
        b1, b32 = embed_speed(d, name, 1), embed_speed(d, name, 32)
        drop, where = max(((-s["delta"]["ndcg@10"]["value"], s["name"]) for s in v["retrieval"]["slices"][1:]),
                          default=(0.0, ""))
        rows.append(cells(f"`{name}`", f"{ratio(b1['speedup'])} [{span(b1['lo'], b1['hi'])}]",
                          f"{ratio(b32['speedup'])} [{span(b32['lo'], b32['hi'])}]", f"{100 * embed_share(d, name):.2f}%",
                          f"{drop:.4f} ({where})" if drop > 0 else "none",
                          "yes" if v["meets_budget"] else "no: " + "; ".join(v["budget_reasons"][:1])))
    return "\n".join(rows + ["", f"Source: `{EMBED}` ({d['machine']['cpu_model']}, {d['speed']['cpu']}, {date_of(EMBED)})."])


def date_of(source: str) -> str:
    """A result file's date, the last part of its name (``<what>_<machine>_<YYYY-MM-DD>.json``)."""
    found = re.search(r"(\d{4}-\d{2}-\d{2})\.json$", source)
    if found is None:
        raise FigureError(f"{source}: a result file's name ends in its date (<what>_<machine>_<YYYY-MM-DD>.json)")
    return found[1]


# --- past one machine (benchmarks/bench_scale.py's JSON) ---

SCALE_ROWS, SCALE_NODES, SCALE_CORES = 1_000_000, (1, 4, 16), 8


def scale_table(found: Optional[list[Path]] = None) -> str:
    """docs/scale.md's table: each graph's rows per second on both engines and per actor, measured; then the time
    to score 1,000,000 rows with the FP32 graph and one INT8 graph on 1, 4 and 16 nodes of 8 cores, predicted from
    the per-actor throughput. Until a result file is committed, a line that says so."""
    found = load(SCALE_GLOB) if found is None else found
    if not found:
        return ("*No result file yet: the table appears here once `benchmarks/bench_scale.py` has run on a quiet machine and "
                f"its JSON is committed as `{SCALE_GLOB.replace('*', '<machine>_<YYYY-MM-DD>')}`.*")
    path = found[-1].relative_to(REPO).as_posix() if found[-1].is_relative_to(REPO) else str(found[-1])
    d = json.loads(found[-1].read_text())
    pool, per_actor = d["pool"], {g: t["per_actor_rows_per_s"] for g, t in d["throughput"].items()}
    rows = [cells("graph", "local, rows/s", "ray, rows/s", "Ray's overhead [range]", "per actor (steady), rows/s"), cells(*["---"] * 5)]
    for g, t in d["throughput"].items():
        rows.append(cells(f"`{g}`", f"{t['local_rows_per_s']:.0f}", f"{t['ray_rows_per_s']:.0f}",
                          f"{100 * t['overhead']:+.1f}% [{100 * t['overhead_min']:+.1f}, {100 * t['overhead_max']:+.1f}]",
                          f"{t['per_actor_rows_per_s']:.1f}"))
    seconds = {n: sum(SCALE_ROWS / (r * SCALE_CORES * n) for r in per_actor.values()) for n in SCALE_NODES}
    rows += ["", cells(f"nodes of {SCALE_CORES} cores", *SCALE_NODES), cells(*["---"] * (1 + len(SCALE_NODES))),
             cells(f"{SCALE_ROWS:,} rows, {' + '.join(f'`{g}`' for g in per_actor)}, predicted",
                   *(minutes(seconds[n]) for n in SCALE_NODES))]
    return "\n".join(rows + ["", f"Measured: {d['rows']:,} reviews, {d['rounds']} interleaved rounds, local {d['threads']} threads "
                              f"against {pool['actors']} actor(s) of {pool['threads_per_actor']} thread, batch {d['batch_size']}, "
                              f"on {d['machine']['cpu_model']}, {date_of(path)}: `{path}`."])


TRAIN_RUNS = tuple(f"{RESULTS}/train_{what}_epyc-avx2_2026-11-25.json" for what in ("minilm", "tiny", "dropout"))
TRAIN_MODELS = {"minilm": "MiniLM-L6 (22.7M)", "tiny": "tiny BERT (random, 2 layers, hidden 32)"}


def train_verdict(lo: float, hi: float) -> str:
    """A like-for-like ratio's verdict: a gain needs the whole interval above 1.00x, a loss the whole below."""
    return "gain" if lo > 1 else "slower" if hi < 1 else "no gain"


def train_rows(comparison: str) -> list[tuple[str, dict, dict]]:
    """``(model, row, its baseline row)`` of the training benchmark's committed runs, for rows of ``comparison``
    (``backend``: ORTModule against eager with the same settings; ``pytorch setting``: eager against eager)."""
    out = []
    for source in TRAIN_RUNS:
        d = load(source)
        by_name = {(r["variant"], r["batch"], r["seq"]): r for r in d["interleaved"]}
        for r in d["interleaved"]:
            if r["comparison"] == comparison and r["status"] == "ok":
                out.append((TRAIN_MODELS[d["model"]], r, by_name[(r["baseline"], r["batch"], r["seq"])]))
    return out


def train_table(comparison: str, head: str) -> str:
    rows = [cells("model", "shape", head, "baseline (same settings)", "variant ms", "baseline ms", "speed (95% interval)",
                  "verdict"), cells(*["---"] * 8)]
    for model, r, base in train_rows(comparison):
        lo, hi = r["interval"]
        speed = f"{ratio(r['speed_vs_baseline'])} ({span(lo, hi)})"
        verdict = train_verdict(lo, hi)
        rows.append(cells(model, f"{r['batch']}x{r['seq']}", r["what"], base["what"], f"{1000 * r['median_step_s']:.0f}",
                          f"{1000 * base['median_step_s']:.0f}", f"**{speed}**" if verdict == "gain" else speed, verdict))
    d = load(TRAIN_RUNS[0])
    sources = ", ".join(f"`{s}`" for s in TRAIN_RUNS)
    return "\n".join(rows + ["", f"Source: {sources} ({d['machine']['cpu_model']}, {d['machine']['isa']}, "
                                 f"{date_of(TRAIN_RUNS[0])})."])


TABLES: dict[str, Callable[[], str]] = {
    "glance": glance_table, "embed.variants": embed_variants_table, "scale": scale_table,
    "train.backends": lambda: train_table("backend", "ORTModule variant"),
    "train.settings": lambda: train_table("pytorch setting", "PyTorch setting")}


def table_text(name: str) -> str:
    if name not in TABLES:
        raise FigureError(f"<!-- results-table: {name} --> names no table of docs/hooks/figures.py's TABLES")
    return TABLES[name]()


# --- figures typed by hand where a generated one belongs ---

NUMBER_WORD = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
# (what it is, the pattern, the pages it applies to: None for every page)
HAND_TYPED: list[tuple[str, re.Pattern, Any]] = [
    ("the number of notebooks (figure notebooks.count)", re.compile(rf"\b{NUMBER_WORD} notebooks\b", re.I), None),
    ("`make test`'s duration (figures test_suite.*)", re.compile(r"\bmake test\b(?![-\w])[^\n]{0,100}?\b\d+ min\b"), None),
    ("the default presets (figure audit.presets)", re.compile(r"\bdefaults?(?: to)?\W{1,4}`?(?:dynamic|static)\b"), None),
    ("a default budget in points (figures audit.budget_*)",
     re.compile(r"\b\d+(?: and \d+)? points? (?:overall )?by default\b|\bby default[^.\n]{0,30}\b\d+ points?\b"), None),
    ("a default typed as a number (a figure of the config's default)",
     re.compile(r"\b\d+(?:\.\d+)? by default\b|\bdefault:? \d+(?:\.\d+)?\b"), None),
    ("a stack's size on disk (figures disk.*)", re.compile(r"\b\d+(?:\.\d+)? Gi?B (?:of (?:it )?)?(?:disk|CUDA)\b"), None),
    ("a speed-up (a figure from a result file)", re.compile(r"(?<![\w.])\d+(?:\.\d+)?x\b"), ("README.md", "docs/index.md")),
]
GENERATED_BLOCK = re.compile(r"<!-- (cli-reference|config-reference) -->.*?<!-- /\1 -->", re.S)


def outside_markers(text: str) -> str:
    """``text`` without its generated parts (figures, results tables, the command-line reference), each
    replaced by a space so that the rest keeps its lines."""
    for pattern in (FIGURE, TABLE, GENERATED_BLOCK):
        text = pattern.sub(lambda m: "\n" * m[0].count("\n") or " ", text)
    return text


def hand_typed(text: str, page: str) -> list[str]:
    """``page:line: what`` for each figure typed by hand in ``text`` that a marker should generate."""
    text = outside_markers(text)
    hits = []
    for what, pattern, only in HAND_TYPED:
        if only is not None and page not in only:
            continue
        for m in pattern.finditer(text):
            hits.append(f"{page}:{text.count(chr(10), 0, m.start()) + 1}: {what}: {m[0]!r}")
    return hits
