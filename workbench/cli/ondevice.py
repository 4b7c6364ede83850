"""``ondevice``: ONNX Runtime on-device training beside PyTorch eager on the same batches, exported for inference."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import runs
from ..core import serial
from .common import fail, locked, print_json, output_flags
from .flags import Flag, add_config_flags, build, cli_only
from .progress import TerminalProgress, drawn, stop_on_sigint

ONDEVICE_FLAGS = (
    "trainable", Flag("last_n_layers", "last-n"), "loss", "optimizer", "lr", "weight_decay",
    "steps", "batch_size", "max_length", "seed", "data", "max_train", "opset", "tolerance", "threads",
    "validation_examples", Flag("measure_memory", "memory"), "web",
)


def _cmd_ondevice(args) -> int:
    from ..models.hub import model_name
    from ..ondevice import OnDeviceConfig, OnDeviceError, check_model, run_ondevice, table
    from ..runs import RunError, new_run_dir

    try:
        cfg = build(OnDeviceConfig, args, base=OnDeviceConfig.quick() if args.model == "tiny" else OnDeviceConfig.default())
        check_model(args.model)  # a wrong folder fails here, before a run folder is made
        if args.serve:  # the page it would serve must be written: say so before the run, not after it
            from ..ondevice.web import ort_web_missing

            if not cfg.web:
                return fail("--serve serves the run's web page, which --no-web skips; drop one of them")
            if (missing := ort_web_missing()) is not None:
                return fail(f"--serve: the web page cannot be written: {missing}")
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(f"ondevice-{model_name(args.model)}", args.runs)
        with locked(run_dir, args, "ondevice"), drawn(None if args.json else TerminalProgress("on-device")) as bar:
            result = run_ondevice(args.model, cfg, run_dir, progress=None if bar is None else bar.update, stop=stop_on_sigint())
    except (OnDeviceError, ValueError, RunError) as exc:  # RunError: a locked run folder (a FileNotFoundError too)
        return fail(" ".join(str(exc).split()))
    except OSError as exc:
        return fail(f"cannot write the run folder ({exc.strerror or exc}); choose another --runs or --run-dir")
    if args.json:
        print_json({"run_dir": str(run_dir), "result": str(run_dir / runs.layout.ONDEVICE_FILE), "ok": result.ok,
                     "step_time_ratio": result.step_time_ratio, "memory_ratio": result.memory_ratio, **serial.to_dict(result)})
    else:
        print(table(result))
        print(f"saved: {run_dir / runs.layout.ONDEVICE_FILE}   next: workbench fuse {result.inference_dir}")
    code = 0 if result.ok else 1
    if args.serve:
        served = _serve(run_dir, args.port)
        return served if served else code
    return code


def _serve(run_dir: Path, port: int) -> int:
    """Serve the run's page on 127.0.0.1 until Ctrl-C (exit 0), or one line and exit 2."""
    import signal

    from ..ondevice import OnDeviceError
    from ..ondevice.web import PageServer

    try:
        server = PageServer(run_dir, port, quiet=False)
    except OnDeviceError as exc:
        return fail(str(exc))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the run's handler only asked to stop between steps
    print(f"serving the on-device page on {server.url} (127.0.0.1 only; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.httpd.server_close()
    return 0


def _cmd_serve(args) -> int:
    from ..ondevice import OnDeviceError
    from ..ondevice.browser import run_root

    try:
        root = run_root(args.run)
    except OnDeviceError as exc:
        return fail(str(exc))
    return _serve(root, args.port)


def _cmd_import(args) -> int:
    from ..ondevice import OnDeviceError
    from ..ondevice.browser import run_root, import_parameters, import_table
    from ..runs import RunError

    try:
        with locked(run_root(args.run), args, "ondevice import"):
            record = import_parameters(args.run, args.file)
    except (OnDeviceError, ValueError, RunError) as exc:  # RunError: a locked run folder (a FileNotFoundError too)
        return fail(" ".join(str(exc).split()))
    except OSError as exc:
        return fail(f"cannot read {args.file} or write the run folder ({exc.strerror or exc}); check the paths")
    if args.json:
        print_json(record)
    else:
        print(import_table(record))
        print(f"saved: {record.export_dir / runs.layout.BROWSER_FILE}   next: workbench fuse {record.export_dir}")
    return 0 if record.validation.passed else 1


def add_ondevice(sub) -> None:
    from ..ondevice import OnDeviceConfig

    p = sub.add_parser("ondevice", help="export ONNX Runtime on-device training artifacts, train with onnxruntime.training.api "
                                        "beside PyTorch eager, export the result for inference",
                       description="From a fine-tuned checkpoint: write the training, eval and optimizer graphs and the "
                                   "checkpoint; train STEPS steps with onnxruntime.training.api and with PyTorch eager on the "
                                   "same batches (dropout off); compare the loss curves, step time and peak memory; export "
                                   "the trained model to an inference graph (an export folder that `workbench fuse` and "
                                   "`workbench quantize` read). Exit 0: curves agree and the graph validates; 1: they do "
                                   "not; 2: bad input.")
    cli_only(p, "--model", default="tiny", help="the stage's input: 'tiny', 'minilm', a fine-tuned Hugging Face model "
                                              "folder or its Hub id (ORG/NAME, from the cache); defaults below are tiny's "
                                              "(for the others: last layer + head, 20 steps of 16, lr 1e-4) (default: tiny)")
    add_config_flags(p, OnDeviceConfig, ONDEVICE_FLAGS, base=OnDeviceConfig.quick())
    output_flags(p)
    cli_only(p, "--serve", action="store_true", help="after the run, serve its web page on 127.0.0.1 and print the "
                                                     "address (Ctrl-C stops)")
    cli_only(p, "--port", type=int, default=0, help="port for --serve on 127.0.0.1 (default: 0, any free port)")
    p.set_defaults(func=_cmd_ondevice)
    actions = p.add_subparsers(dest="ondevice_action", metavar="{import,serve}", title="after a run",
                               description="`workbench ondevice import RUN FILE`, `workbench ondevice serve RUN`")
    imp = actions.add_parser("import", help="fold the parameters trained in the run's web page into its checkpoint and "
                                            "export the inference graph (RUN/browser, what fuse and quantize read)",
                             description="Read the file the page's 'Download trained parameters' saved (float32, the "
                                         "trainable parameters), copy it into the run's initial checkpoint with "
                                         "onnxruntime.training.api, export and validate the inference graph in "
                                         "RUN/browser, recorded as trained in the browser. Exit 0: it validates; "
                                         "1: it does not; 2: bad input.")
    imp.add_argument("run", help="the on-device run folder (the one `workbench ondevice` wrote)")
    imp.add_argument("file", help="the downloaded parameters (trained_parameters.bin)")
    output_flags(imp, None, new_runs=False)
    imp.set_defaults(func=_cmd_import)
    srv = actions.add_parser("serve", help="serve a run's web page on 127.0.0.1 and print the address (Ctrl-C stops)",
                             description="Serve the run folder over http on 127.0.0.1 only (the page loads ../artifacts), "
                                         "with the MIME types the browser needs for .mjs and .wasm.")
    srv.add_argument("run", help="the on-device run folder")
    cli_only(srv, "--port", type=int, default=0, help="port on 127.0.0.1 (default: 0, any free port)")
    srv.set_defaults(func=_cmd_serve)
