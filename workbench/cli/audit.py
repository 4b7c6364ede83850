"""``audit``: someone else's classifier or embedding model (read from the folder, ``--task`` overrides) on all of
their labelled data, in one report, with an exit code a CI job can act on."""

from __future__ import annotations

import argparse
import dataclasses

from .common import fail, locked
from .config_fields import registry_key
from .flags import Flag, add_config_flags, build, cli_only, given
from .progress import ScoringBar

AUDIT_EXIT_CODES = """exit codes:
  0  a quantized (INT8) variant meets both budgets and the speed guard (the verdict names the fastest)
  3  no quantized variant meets the budgets and the speed guard (--min-speedup, default 1.05x faster than
     FP32 at the lower end of its interval): keep the FP32 graph
  2  bad input, found before any heavy work: no such folder, not a sequence-classification model,
     an architecture the exporter does not handle, label values the model does not know, missing
     columns, an empty or unreadable file, an output folder that cannot be written
  1  a step failed during the run (environment incomplete, export or validation failed); the
     report says which

Writes OUT/report.html (one self-contained file: open it offline or send it) and OUT/summary.json
(every figure of the report; fields documented in the README), each replaced atomically at the
end, so a re-run into the same --out keeps the previous report until the new one is complete."""


def _cmd_audit(args) -> int:
    from ..audit import AuditConfig, AuditInputError, check_inputs, run_audit
    from ..embed import EMBEDDING, EmbedError, check_task_of

    try:
        task = check_task_of(args.model, args.task)  # the kind read from the folder; --task overrides
    except EmbedError as exc:
        return fail(str(exc), 2)
    if task == EMBEDDING:
        return _cmd_embed_audit(args)
    try:
        quick = given(AuditConfig, args).get("quick", False)  # on the command line or in the --config file
        cfg = build(AuditConfig, args, **({"n_boot": 200} if quick else {}))  # --n-boot still wins
        checked = check_inputs(args.model, cfg, args.out)
    except AuditInputError as exc:
        return fail(str(exc), 2)
    return _run_checked(run_audit, cfg, checked, args)


def _cmd_embed_audit(args) -> int:
    """A flag only a classifier's audit reads is refused here rather than ignored."""
    from ..audit import AuditConfig
    from ..embed import EmbedError
    from ..embed.audit import BUILTIN, EmbedAuditConfig, check_embed_inputs, run_embed_audit

    g = given(AuditConfig, args)
    theirs = {f.name for f in dataclasses.fields(EmbedAuditConfig)}
    flag_of = {path: "--" + dest.replace("_", "-") for dest, paths in getattr(args, registry_key(AuditConfig)) for path in paths}
    for_classifiers = [flag_of.get(k, k) for k in g if k not in theirs and k != "quick"]
    if for_classifiers:
        return fail(f"{', '.join(for_classifiers)}: for a classifier's audit, and {args.model} is an embedding model; leave "
                    f"{'it' if len(for_classifiers) == 1 else 'them'} out (its budget: --min-ndcg-ratio, --max-slice-drop)", 2)
    shared = {k: v for k, v in g.items() if k in theirs}
    if shared.get("data") == "":
        shared["data"] = BUILTIN
    quick = {"n_boot": 200, "timing_rounds": 8, "retimes": 0} if g.get("quick") else {}
    try:
        cfg = build(EmbedAuditConfig, args, **{**quick, **shared})
        checked = check_embed_inputs(args.model, cfg, args.out)
    except EmbedError as exc:
        return fail(str(exc), 2)
    return _run_checked(run_embed_audit, cfg, checked, args)


def _run_checked(run, cfg, checked, args) -> int:
    """``run`` (either kind's audit) on inputs already checked, holding the output folder's lock."""
    from ..runtime.engine import EngineError

    with locked(checked.out_dir, args, "audit"):
        try:
            result = run(args.model, cfg, args.out, log=lambda line: print(line, flush=True), checked=checked,
                         progress=ScoringBar())
        except EngineError as exc:  # Ray did not start or answer: one line, nothing reported
            return fail(str(exc), 1)
    print(f"report: {result.report_path}\nexit code {result.exit_code} ({result.seconds:.0f} s)")
    return result.exit_code


def add_audit(sub) -> None:
    from ..audit import AuditConfig
    from ..quant import PRESETS

    p = sub.add_parser(
        "audit", help="audit a fine-tuned classifier on all of your data: export, fuse, INT8 presets, slice drift, "
                      "search, one report.html; exit 0 meets the budget, 3 none does, 2 bad input",
        description="Audit a local Hugging Face sequence classifier on every row of a labelled file: export and "
                    "validate, fuse, quantize with the presets, per-slice accuracy drift with 95%% intervals, the "
                    "accuracy-constrained search, and one report. Nothing is trained and the file is not split: every row "
                    "is scored, except a seeded calibration subset for static presets (named in the report).",
        epilog=AUDIT_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli_only(p, "--model", required=True, help="Hugging Face model folder (config.json, weights, tokenizer), or a Hub id "
                                               "such as sentence-transformers/all-MiniLM-L6-v2 (read from the Hugging Face "
                                               "cache): the audit's input")
    add_config_flags(p, AuditConfig, (
        Flag("data", required=True), "text_column", "label_column",
        Flag("slice_columns", "slice-column", nargs="+", split=False, metavar="C"),
        Flag("presets", nargs="+", metavar="P",  # words or a comma list
             help=f"quantization presets, each one of {', '.join(PRESETS)}"),
        "budget_overall", "budget_slice", Flag("include_small_slices", "include-small"), "min_speedup", "fusion",
    ))
    cli_only(p, "--out", help="output folder (default: runs/<timestamp>-audit-<model>)")
    _add_embed_flags(p)
    add_config_flags(p, AuditConfig, (Flag("quick", negatable=False), "n_boot", "calibration_size", "max_length",
                                      "eval_batch_size", "seed"))
    g = p.add_argument_group("where the rows are scored (docs/audit.md, \"Past one machine\")")
    add_config_flags(p, AuditConfig, ("engine", "ray_address", "ray_actors", "ray_threads"), group=g)
    p.set_defaults(func=_cmd_audit)


def _add_embed_flags(p) -> None:
    from ..embed.audit import EmbedAuditConfig
    from ..embed.retrieval import QUERY_KINDS

    g = p.add_argument_group("embedding models (a sentence-transformers folder: modules.json, a Pooling module)")
    cli_only(g, "--task", choices=("auto", "classification", "embedding"), default="auto",
             help="what the model does: read from the folder by default (modules.json means embedding)")
    add_config_flags(p, EmbedAuditConfig, (
        Flag("queries", metavar="FILE"), "query_column", "relevant_column", "id_column",
        Flag("builtin_queries", "queries-from", choices=QUERY_KINDS), "max_queries", "max_docs", "exclude_worst",
        "min_ndcg_ratio", "max_slice_drop", Flag("time_speed", "speed"), Flag("search", negatable=False), "max_excluded",
    ), group=g)
