"""The audit of an embedding model, the ``embed-audit`` route. Exit codes: 0 a quantized variant meets the
budget, 3 none does, 1 the exported graph failed validation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..flow.sequence import run_stages
from .evaluate import DEFAULT_MAX_SLICE_DROP, DEFAULT_MIN_NDCG_RATIO, DEFAULT_MIN_SLICE_SIZE, EmbedBudget
from .folder import EmbedError, EmbedFolder, as_embed_error, read_folder
from .retrieval import QUERY_KINDS, RetrievalTask

if TYPE_CHECKING:
    from ..runtime.progress import ProgressHook

BUILTIN = "builtin"
DEFAULT_PRESETS = ("dynamic", "dynamic-per-channel", "dynamic-fp32-embeddings")
Log = Callable[[str], None]


def _field(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class EmbedAuditConfig:
    data: str = _field(BUILTIN, "builtin (the built-in retrieval task) or a table of texts: the corpus")
    queries: Optional[str] = _field(None, "a pairs file, one row per query and relevant document of the data corpus "
                                          "(without it, a corpus is scored without labels)")
    builtin_queries: str = _field("plots", "data builtin: plot descriptions (plots) or reviews ask for the reviews of "
                                           "their movie")
    text_column: str = _field("text", "the corpus column that holds the texts")
    id_column: str = _field("id", "the corpus column the pairs name documents by")
    query_column: str = _field("query", "the query column of the pairs file")
    relevant_column: str = _field("relevant", "the column of the pairs file naming a relevant document by its id_column "
                                              "value (or its text when the corpus has no such column)")
    slice_columns: tuple[str, ...] = _field((), "columns whose values group the queries (or texts) into slices")
    presets: tuple[str, ...] = _field(DEFAULT_PRESETS, "quantization presets to build and score")
    exclude_worst: int = _field(0, "per preset, also re-quantize with the K nodes of worst per-node error left in FP32")
    min_ndcg_ratio: float = _field(DEFAULT_MIN_NDCG_RATIO, "budget: share of FP32's NDCG@10 a variant must keep over "
                                                           "all queries")
    max_slice_drop: float = _field(DEFAULT_MAX_SLICE_DROP, "budget: NDCG@10 a variant may lose on any query slice big "
                                                           "enough to judge")
    min_slice_size: int = _field(DEFAULT_MIN_SLICE_SIZE, "budget: queries a slice needs to be judged")
    max_queries: Optional[int] = _field(None, "score only the first N queries (a quick look)")
    max_docs: Optional[int] = _field(None, "data builtin: keep the relevant reviews plus others up to N documents")
    max_texts: int = _field(5000, "a corpus without pairs: the most texts read from it")
    n_boot: int = _field(1000, "bootstrap replicates of the NDCG@10 intervals (at least 100)")
    seed: int = _field(0, "random seed of the built-in task's draw and of the bootstrap")
    batch_size: int = _field(32, "texts per batch when encoding")
    threads: Optional[int] = _field(None, "intra-op threads of the ONNX graphs (default: the machine's default)")
    time_speed: bool = _field(True, "time the graphs against SentenceTransformer.encode")
    timing_rounds: int = _field(15, "interleaved timing rounds per batch size (and per search candidate); --quick: 8")
    retimes: int = _field(1, "times a timing taken on a busy machine is taken again, each after waiting up to 10 s for "
                             "the machine to calm down; --quick: 0")
    reference_check: bool = _field(True, "also score the task with SentenceTransformer.encode, beside the FP32 graph")
    calibration_size: int = _field(128, "texts the static presets calibrate on")
    search: bool = _field(False, "also search the presets for the fastest within the NDCG@10 budget, leaving a preset's "
                                 "worst nodes in FP32 (1, 2, 4, ... up to max_excluded) until no slice is below its budget")
    max_excluded: int = _field(8, "search: most nodes a preset may leave in FP32")
    min_speedup: float = _field(1.05, "speed guard: the least speed-up over the FP32 graph at batch 1 (lower end of its interval) "
                                      "a variant needs to be chosen; 0 = off")
    engine: str = _field("local", "where the texts are encoded with each graph: local (this process) or ray (a pool of Ray actors)")
    ray_address: Optional[str] = _field(None, "engine ray: the cluster to connect to (default: $RAY_ADDRESS, else a local Ray "
                                              "instance on 127.0.0.1 for the run)")
    ray_actors: Optional[int] = _field(None, "engine ray: actors encoding at once, each with the graph open (default: Ray's CPUs "
                                             "/ ray_threads)")
    ray_threads: int = _field(1, "engine ray: ONNX Runtime threads (and Ray CPUs) of each actor")

    def __post_init__(self) -> None:
        from ..quant import EvalConfig, EvaluationError, QuantConfig, check_min_speedup
        from ..quant.config import QuantizeError
        from ..runtime.engine import EngineError

        object.__setattr__(self, "slice_columns", tuple(self.slice_columns))
        object.__setattr__(self, "presets", tuple(self.presets))
        if self.builtin_queries not in QUERY_KINDS:
            raise EmbedError(f"builtin_queries must be one of {', '.join(QUERY_KINDS)}, got {self.builtin_queries!r}")
        with as_embed_error(QuantizeError):
            for p in self.presets:
                QuantConfig.preset(p)
        for name, why in (("exclude_worst", ""), ("max_excluded", " (nodes the search may leave in FP32)")):
            if int(getattr(self, name)) < 0:
                raise EmbedError(f"{name} must be 0 or more{why}, got {getattr(self, name)}")
        if self.queries is not None and self.data == BUILTIN:
            raise EmbedError("queries (a pairs file) needs the corpus it points into as data, got data='builtin'; "
                             "give the corpus file as data")
        EmbedBudget(self.min_ndcg_ratio, self.max_slice_drop, self.min_slice_size)
        with as_embed_error(QuantizeError):
            object.__setattr__(self, "min_speedup", check_min_speedup(self.min_speedup))
        with as_embed_error(EvaluationError):  # the intervals' and the search's rules for the bootstrap and its seed
            EvalConfig(n_boot=self.n_boot, seed=self.seed)
        unset = {"max_queries": "every query", "max_docs": "every document", "threads": "the machine's default"}
        for name, least in (("batch_size", 1), ("calibration_size", 1), ("max_texts", 1), ("timing_rounds", 3), ("retimes", 0),
                            ("max_queries", 1), ("max_docs", 1), ("threads", 1)):
            v = getattr(self, name)
            if (v is not None or name not in unset) and (isinstance(v, bool) or not isinstance(v, int) or v < least):
                or_unset = f" (or unset: {unset[name]})" if name in unset else ""
                raise EmbedError(f"{name} must be a whole number of at least {least}{or_unset}, got {v!r}")
        with as_embed_error(EngineError):
            self.engine_config()

    def engine_config(self):
        """Where the texts are encoded (:func:`workbench.runtime.engine.scoring_engine`)."""
        from ..runtime.engine import EngineConfig

        return EngineConfig(self.engine, self.ray_address, self.ray_actors, self.ray_threads)

    @property
    def budget(self) -> EmbedBudget:
        return EmbedBudget(self.min_ndcg_ratio, self.max_slice_drop, self.min_slice_size)


@dataclass(frozen=True)
class CheckedEmbedInputs:
    folder: EmbedFolder
    task: Optional[RetrievalTask]
    texts: list[str]
    text_slices: dict[str, list[int]]
    out_dir: Path
    source: str


@dataclass(frozen=True)
class EmbedAuditResult:
    out_dir: Path
    report_path: Path
    summary_path: Path
    exit_code: int
    verdict: dict = field(default_factory=dict)
    seconds: float = 0.0


def check_embed_inputs(model, cfg: EmbedAuditConfig, out_dir=None) -> CheckedEmbedInputs:
    """Read the folder and the data and build the task; every problem one :class:`EmbedError` before anything is written."""
    from .. import runs
    from ..models.hub import model_name
    from ..runtime.engine import EngineError, check_engine
    from .retrieval import builtin_task, column_slices, length_slices, load_pairs_task

    with as_embed_error(EngineError):  # Ray installed and its cluster answering, for engine ray
        check_engine(cfg.engine_config())
    folder = read_folder(model)
    texts: list[str] = []
    slices: dict[str, list[int]] = {}
    if cfg.data == BUILTIN:
        task = builtin_task(cfg.builtin_queries, cfg.max_queries, cfg.max_docs, cfg.seed)
        source = task.description
    else:
        path = Path(cfg.data).expanduser()
        if not path.is_file():
            raise EmbedError(f"data file {cfg.data!r} does not exist; give a table of texts (csv, jsonl, parquet) or 'builtin'")
        if cfg.queries is not None:
            if not Path(cfg.queries).expanduser().is_file():
                raise EmbedError(f"queries file {cfg.queries!r} does not exist; give a pairs file (query, relevant document)")
            task = load_pairs_task(path, Path(cfg.queries).expanduser(), cfg.text_column, cfg.id_column, cfg.query_column,
                                   cfg.relevant_column, cfg.slice_columns)
            if cfg.max_queries is not None:
                task = task.only(range(min(cfg.max_queries, len(task.queries))))
            source = f"{cfg.data} with queries {cfg.queries}"
        else:
            from ..data.load import DataError, read_table

            with as_embed_error(DataError):
                frame = read_table(path)
            if cfg.text_column not in frame.columns:
                raise EmbedError(f"{path}: no column {cfg.text_column!r} (text_column); its columns are {list(frame.columns)[:12]}")
            for c in cfg.slice_columns:
                if c not in frame.columns:
                    raise EmbedError(f"{path}: no slice column {c!r}; its columns are {list(frame.columns)[:12]}")
            frame = frame.dropna(subset=[cfg.text_column])
            frame = frame[frame[cfg.text_column].astype(str).str.strip().str.len() > 0].head(cfg.max_texts)
            if frame.empty:
                raise EmbedError(f"{path}: no texts in column {cfg.text_column!r}; give a file with at least one text")
            task = None
            texts = frame[cfg.text_column].astype(str).tolist()
            slices = {"all": list(range(len(texts))), **length_slices(texts)}
            for c in cfg.slice_columns:
                slices.update(column_slices(frame[c].tolist(), c))
            source = f"{cfg.data} ({len(texts)} texts, no labels)"
    out = Path(out_dir) if out_dir is not None else runs.new_run_dir(f"audit-embed-{model_name(folder.folder)}")
    if out.exists() and not out.is_dir():
        raise EmbedError(f"output folder {str(out)!r} is a file; give a folder with --out")
    return CheckedEmbedInputs(folder, task, texts, slices, out, source)


@dataclass(frozen=True)
class EmbedQuantRun:
    """``evaluation`` and ``speed`` are None when the export failed validation."""

    out_dir: Path
    folder: EmbedFolder
    export: Any
    variants: Any
    evaluation: Any
    speed: Any
    source: str
    seconds: float
    search: Any = None  # the SearchResult, when cfg.search and the task has labels
    report: Any = None  # (report.html, summary.json, summary), when the route ran its report


def run_embed_quantization(model, cfg: Optional[EmbedAuditConfig] = None, out_dir=None, *, log: Log = print,
                           checked: Optional[CheckedEmbedInputs] = None, progress: Optional[ProgressHook] = None,
                           report: bool = False) -> EmbedQuantRun:
    """The ``embed-audit`` route, its report only with ``report``; a stage that fails raises its error as it is."""
    from ..workflows.stages import stages_for
    from ..workflows.steps import Job

    cfg = cfg or EmbedAuditConfig()
    t0 = time.perf_counter()
    checked = checked or check_embed_inputs(model, cfg, out_dir)
    out = checked.out_dir
    out.mkdir(parents=True, exist_ok=True)
    log(f"embedding model {checked.folder.folder}: {checked.folder.describe()}")
    log(f"data: {checked.source}")
    names = ("export", "quantize", "evaluate", "search") + (("report",) if report else ())
    job = Job(out, {n: cfg for n in names}, log=log, model=checked.folder.folder, data=checked, progress=progress,
              task="embedding", report={"started": t0})
    done = run_stages(stages_for("embed-audit", job, leave_out=() if report else ("report",)), log=lambda _line: None,
                      fatal=(Exception,)).results
    evaluation, speed = done.get("evaluate") or (None, None)
    return EmbedQuantRun(out, checked.folder, done["export"], done.get("quantize"), evaluation, speed, checked.source,
                         time.perf_counter() - t0, done.get("search"), done.get("report"))


def run_embed_audit(model, cfg: Optional[EmbedAuditConfig] = None, out_dir=None, *, log: Log = print,
                    checked: Optional[CheckedEmbedInputs] = None, progress: Optional[ProgressHook] = None) -> EmbedAuditResult:
    """:func:`run_embed_quantization` with report.html and summary.json."""
    run = run_embed_quantization(model, cfg, out_dir, log=log, checked=checked, progress=progress, report=True)
    page, written, summary = run.report
    return EmbedAuditResult(run.out_dir, page, written, summary["verdict"]["exit_code"], summary["verdict"], run.seconds)
