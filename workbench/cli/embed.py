"""``audit`` on an embedding model (a sentence-transformers folder): its flags and its command. The
kind of model is read from the folder (``--task`` overrides); see :mod:`workbench.embed.audit`."""

from __future__ import annotations

from .common import fail, locked
from .flags import cli_only
from .progress import ScoringBar


def add_embed_audit_flags(p) -> None:
    g = p.add_argument_group("embedding models (a sentence-transformers folder: modules.json, a Pooling module)")
    cli_only(g, "--task", choices=("auto", "classification", "embedding"), default="auto",
             help="what the model does: read from the folder by default (modules.json means embedding)")
    cli_only(g, "--queries", metavar="FILE",
             help="embedding: a pairs file, one row per query and relevant document of the --data corpus "
                  "(without it and with a --data file, quality is measured without labels); --data builtin: the built-in task")
    cli_only(g, "--query-column", default="query", help="embedding: the query column of --queries (default: query)")
    cli_only(g, "--relevant-column", default="relevant",
             help="embedding: the column of --queries naming a relevant document by its --id-column value (or its text "
                  "when the corpus has no such column; default: relevant)")
    cli_only(g, "--id-column", default="id", help="embedding: the corpus column the pairs name documents by (default: id)")
    cli_only(g, "--queries-from", choices=("plots", "reviews"), default="plots",
             help="embedding, --data builtin: plot descriptions (default) or reviews ask for the reviews of their movie")
    cli_only(g, "--max-queries", type=int, help="embedding: score only the first N queries (a quick look)")
    cli_only(g, "--max-docs", type=int, help="embedding, --data builtin: keep the relevant reviews plus others up to N documents")
    cli_only(g, "--exclude-worst", type=int, default=0,
             help="embedding: per preset, also re-quantize with the K nodes of worst per-node error left in FP32")
    cli_only(g, "--min-ndcg-ratio", type=float, default=None,
             help="embedding budget: share of FP32's NDCG@10 a variant must keep over all queries (default 0.997)")
    cli_only(g, "--max-slice-drop", type=float, default=None,
             help="embedding budget: NDCG@10 a variant may lose on any query slice big enough to judge (default 0.01)")
    cli_only(g, "--no-speed", action="store_true", help="embedding: skip the timing against SentenceTransformer.encode")
    cli_only(g, "--search", action="store_true",
             help="embedding: also search the presets for the fastest within the NDCG@10 budget, leaving a preset's worst "
                  "nodes in FP32 (1, 2, 4, ... up to --max-excluded) until no slice is below its budget")
    cli_only(g, "--max-excluded", type=int, default=8, help="embedding, --search: most nodes a preset may leave in FP32 (default 8)")


# the audit's flags that only a classifier's audit reads: given for an embedding model, refused rather than ignored
CLASSIFIER_ONLY = {"label_column": "--label-column", "budget_overall": "--budget-overall", "budget_slice": "--budget-slice",
                   "include_small_slices": "--include-small", "fusion": "--fusion", "max_length": "--max-length",
                   "eval_batch_size": "--eval-batch-size"}


def cmd_embed_audit(args) -> int:
    from ..audit import AuditConfig
    from ..embed import EmbedError
    from ..embed.audit import BUILTIN, DEFAULT_PRESETS, EmbedAuditConfig, check_embed_inputs, run_embed_audit
    from ..runtime.engine import EngineError
    from ..embed.evaluate import DEFAULT_MAX_SLICE_DROP, DEFAULT_MIN_NDCG_RATIO
    from .flags import given

    g = given(AuditConfig, args)
    for_classifiers = [CLASSIFIER_ONLY[k] for k in g if k in CLASSIFIER_ONLY]
    if for_classifiers:
        return fail(f"{', '.join(for_classifiers)}: for a classifier's audit, and {args.model} is an embedding model; leave "
                    f"{'it' if len(for_classifiers) == 1 else 'them'} out (its budget: --min-ndcg-ratio, --max-slice-drop)", 2)
    presets = tuple(p for item in g.get("presets", DEFAULT_PRESETS) for p in str(item).split(",") if p)
    data = g.get("data", args.data)  # on the command line or in the --config file
    try:
        cfg = EmbedAuditConfig(
            data=BUILTIN if data in (BUILTIN, "") else data, queries=args.queries, builtin_queries=args.queries_from,
            text_column=g.get("text_column", "text"), id_column=args.id_column, query_column=args.query_column,
            relevant_column=args.relevant_column, slice_columns=tuple(g.get("slice_columns", ())), presets=presets,
            exclude_worst=args.exclude_worst,
            min_ndcg_ratio=DEFAULT_MIN_NDCG_RATIO if args.min_ndcg_ratio is None else args.min_ndcg_ratio,
            max_slice_drop=DEFAULT_MAX_SLICE_DROP if args.max_slice_drop is None else args.max_slice_drop,
            max_queries=args.max_queries, max_docs=args.max_docs,
            n_boot=int(g.get("n_boot", 200 if g.get("quick") else 1000)), seed=int(g.get("seed", 0)),
            timing_rounds=8 if g.get("quick") else 15, retimes=0 if g.get("quick") else 1,
            calibration_size=int(g.get("calibration_size", 128)), time_speed=not args.no_speed,
            min_speedup=g.get("min_speedup", EmbedAuditConfig.min_speedup),
            search=args.search, max_excluded=args.max_excluded, engine=g.get("engine", "local"),
            ray_address=g.get("ray_address"), ray_actors=g.get("ray_actors"), ray_threads=int(g.get("ray_threads", 1)))
        checked = check_embed_inputs(args.model, cfg, args.out)
    except EmbedError as exc:
        return fail(str(exc), 2)
    with locked(checked.out_dir, args, "audit"):
        try:
            result = run_embed_audit(args.model, cfg, args.out, log=lambda line: print(line, flush=True), checked=checked,
                                     progress=ScoringBar())
        except EngineError as exc:  # Ray did not start or answer: one line, nothing reported
            return fail(str(exc), 1)
    print(f"report: {result.report_path}\nexit code {result.exit_code} ({result.seconds:.0f} s)")
    return result.exit_code
