"""``audit``: someone else's classifier on all of their labelled data, in one report, with an
exit code a CI job can act on."""

from __future__ import annotations

import argparse

from .common import fail, locked
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
    from ..runtime.engine import EngineError

    try:
        task = check_task_of(args.model, args.task)  # the kind read from the folder; --task overrides
    except EmbedError as exc:
        return fail(str(exc), 2)
    if task == EMBEDDING:
        from .embed import cmd_embed_audit

        return cmd_embed_audit(args)
    try:
        quick = given(AuditConfig, args).get("quick", False)  # on the command line or in the --config file
        cfg = build(AuditConfig, args, **({"n_boot": 200} if quick else {}))  # --n-boot still wins
        checked = check_inputs(args.model, cfg, args.out)
    except AuditInputError as exc:
        return fail(str(exc), 2)
    with locked(checked.out_dir, args, "audit"):
        try:
            result = run_audit(args.model, cfg, args.out, log=lambda line: print(line, flush=True), checked=checked,
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
    from .embed import add_embed_audit_flags

    add_embed_audit_flags(p)
    add_config_flags(p, AuditConfig, (Flag("quick", negatable=False), "n_boot", "calibration_size", "max_length",
                                      "eval_batch_size", "seed"))
    g = p.add_argument_group("where the rows are scored (docs/audit.md, \"Past one machine\")")
    add_config_flags(p, AuditConfig, ("engine", "ray_address", "ray_actors", "ray_threads"), group=g)
    p.set_defaults(func=_cmd_audit)
