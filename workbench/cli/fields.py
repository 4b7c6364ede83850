"""What each config field means, as ``--help`` says it: ``FIELD_HELP[config class name][field]``.

Kept with the command line rather than in the config modules (the configs document themselves in
their docstrings; these are the one-line versions a flag needs). :func:`workbench.cli.flags.add_config_flags`
appends the default, read from the config, so no number here can go stale. Every key must be a
field of its class (tests/cli/test_cli_flags.py checks it, so a renamed field shows up there).
"""

from __future__ import annotations

_DEVICE = "cpu, cuda or cuda:N (CUDA needs onnxruntime-gpu: make setup-gpu-infer)"
_DATA_FILE = "'reviews' (built in) or a CSV/TSV/JSONL/Parquet file with text and label columns"

FIELD_HELP: dict[str, dict[str, str]] = {
    "DataConfig": {
        "source": _DATA_FILE,
        "text_column": "column holding the texts",
        "label_column": "column holding the labels",
        "slice_columns": "user columns to slice by",
        "seed": "seed of the stratified train/validation/test split",
        "max_train": "use at most this many training examples",
    },
    "TrainConfig": {
        "model": "'minilm', 'tiny' or a Hugging Face model folder",
        "max_steps": "optimizer steps (overrides --epochs)",
        "epochs": "passes over the training data (when --steps is not set)",
        "batch_size": "examples per batch (one optimizer step takes batch-size x grad-accum)",
        "grad_accum": "batches whose gradients are summed into one optimizer step",
        "max_length": "tokens per text (longer texts are truncated)",
        "pad_to_max": "pad every batch to --max-length (fixed shapes: torch.compile compiles once)",
        "lr": "peak learning rate",
        "schedule": "learning rate after the warm-up: constant, linear or cosine decay to 0",
        "warmup_steps": "steps of linear learning-rate warm-up",
        "optimizer": "adamw (foreach), adamw_fused (one fused kernel) or ort_fused_adam (ONNX Runtime's, CUDA only)",
        "seed": "seed of the data order and the new head's weights",
        "dropout": "dropout on/off (off: loss curves of two backends can be compared step by step)",
        "eval_every": "evaluate every N steps (0: at the end only)",
        "threads": "torch intra-op threads (default: torch's own)",
        "device": "cpu, cuda or cuda:N",
        "precision": "fp32, bf16 (CPUs with AVX-512 BF16 or AMX; eager and compile) or fp16 (CUDA)",
        "opset": "ONNX opset ORTModule exports with (ORTModule's own default is 17; 14 measured faster)",
        "memory_optimizer_level": "ORTModule's memory optimizer: 0 off, 1 layer-wise recompute, 2 recompute incl. "
                                  "compromised subgraphs",
        "ort_threads": "intra-op threads of ONNX Runtime's session (default: same as --threads)",
        "ort_graph_optimization": "graph optimization level of ONNX Runtime's session",
        "ort_allow_spinning": "whether ONNX Runtime's idle threads spin (ORTModule's own default; measured slower "
                              "here) or sleep (--no-spinning)",
        "fallback": "disable: fail loudly; detect: stop and mark the run fell_back",
        "save_graphs": "keep ORTModule's training graphs in the run folder",
        "compile_mode": "torch.compile mode",
    },
    "ExportConfig": {
        "opset": "ONNX opset (11-20; 17 writes LayerNormalization as one op)",
        "max_length": "longest sequence in the validation batches",
        "attn_implementation": "attention implementation to load the model with (eager: what ONNX Runtime fuses)",
        "exporter": ("torch's ONNX exporter: auto (TorchScript while torch ships it: its graphs keep ONNX Runtime's "
                     "Attention fusion; else dynamo), torchscript, or dynamo (same logits, no Attention fusion)"),
        "tolerance": "largest |logit difference| allowed against PyTorch",
        "validation_examples": "how many examples to validate on",
        "validation_split": "data split to validate on",
        "device": f"where ONNX Runtime runs the validation: {_DEVICE}",
    },
    "FusionConfig": {
        "variants": "comma-separated variants to build (unoptimized, the baseline, is always built)",
        "shapes": "BATCHxSEQ,... to time, e.g. 1x32,1x128,8x128",
        "threads": "intra-op threads for ONNX Runtime and PyTorch (default: each runtime's own)",
        "warmup": "untimed runs per shape",
        "repeats": "timed runs per shape",
        "measure_latency": "time the variants and PyTorch (--no-latency: build, validate and diff only)",
        "transformer_session": "session level the transformer-optimized graph runs with",
        "opt_level": "transformer optimizer opt_level",
        "num_heads": "attention heads (0: from the export)",
        "hidden_size": "hidden size (0: from the export)",
        "tolerance": "largest |logit difference| allowed (default: the export's validation tolerance)",
        "device": f"where the variants run and are timed: {_DEVICE}",
        "fp16": "also build the fused graph in float16 (inputs/outputs float32), validated against FP32 with "
                "FP16's tolerance",
        "cuda_graph": "CUDA only: also time each variant as a CUDA graph where ONNX Runtime accepts it, and say "
                      "why where it refuses",
    },
    "QuantConfig": {
        "per_channel": "one weight scale per output column",
        "reduce_range": "7-bit weights (CPUs without VNNI)",
        "calibration": "static calibration method",
        "samples": "static calibration texts",
        "op_types": "comma-separated operator types to quantize (none: the mode's own set)",
        "nodes_to_exclude": "node names to leave in FP32",
        "accuracy_level": "weight-only presets: MatMulNBits compute precision (0 unset/FP32, 4 INT8 activations)",
        "block_size": "weight-only presets: weights per 4-bit block along K (a power of 2, at least 16)",
    },
    "TimingConfig": {
        "shapes": "BATCHxSEQ,... to time (--quick: 1x64)",
        "repeats": "timed runs per shape (--quick: 5)",
        "device": f"where the FP32 and INT8 graphs are timed (accuracy is scored on the CPU either way): {_DEVICE}",
    },
    "OnDeviceConfig": {
        "trainable": "head, last (the last N encoder layers + head) or all",
        "last_n_layers": "with --trainable last: how many encoder layers train",
        "loss": "loss in the training graph",
        "optimizer": "optimizer graph",
        "lr": "learning rate",
        "weight_decay": "AdamW's weight decay",
        "steps": "training steps on each side",
        "batch_size": "examples per step",
        "max_length": "tokens per text",
        "seed": "seed of the data order and the batches",
        "data": _DATA_FILE,
        "max_train": "use at most this many training examples",
        "opset": "opset of the training export (ONNX Runtime's gradient builder fails at 17)",
        "tolerance": "largest per-step loss difference allowed (default: 2e-5, measured)",
        "threads": "intra-op threads of both sides (default: PyTorch's)",
        "validation_examples": "examples the inference graph is validated on",
        "measure_memory": "measure peak memory, one fresh process per side (--no-memory skips it)",
        "web": "write the web page that trains the artifacts in a browser with onnxruntime-web (--no-web skips it)",
    },
    "SearchConfig": {
        "budget_overall": "search: accuracy drop allowed overall (0.01 = 1 point)",
        "budget_per_slice": "search: accuracy drop allowed on every slice big enough to judge",
        "include_small_slices": "search: hold slices under 50 examples to the budget too",
        "min_speedup": "search: speed guard, the least speed-up over FP32 (lower end of its interval) a variant needs; 0 = off",
    },
    "AuditConfig": {
        "data": "CSV, TSV, JSONL or Parquet file with a text and a label column",
        "text_column": "column holding the texts",
        "label_column": "column holding the labels: the model's class names or ids",
        "slice_columns": "column(s) to slice by, one slice per value (repeatable)",
        "presets": "quantization presets",
        "budget_overall": "accuracy a variant may lose overall (0.01 = 1 point)",
        "budget_slice": "accuracy a variant may lose on any slice of 50+ rows",
        "include_small_slices": "hold slices under 50 rows to the budget too",
        "min_speedup": "speed guard: the least speed-up over FP32 (lower end of its interval) a variant needs; 0 = off",
        "quick": "short timings, 200 bootstrap replicates (a smoke run)",
        "n_boot": "bootstrap replicates (--quick: 200)",
        "calibration_size": "most rows held out to calibrate static presets (and at most a fifth of the file)",
        "max_length": "tokens per text (longer texts are truncated)",
        "eval_batch_size": "rows per batch when scoring",
        "seed": "seed of the calibration draw and the bootstrap",
    },
    "EvalConfig": {
        "n_boot": "bootstrap replicates (--quick: 200)",
        "node_error_samples": "texts fed to both graphs for per-node SQNR (0: skip)",
    },
    "BaselineConfig": {
        "batch_size": "examples per batch when scoring (dynamic INT8 depends on it; 1 = one request at a time)",
    },
    "DemoConfig": {
        "backends": "comma-separated subset of eager,ortmodule,compile",
        "search": "the accuracy-constrained quantization search (--no-search skips it)",
    },
}
