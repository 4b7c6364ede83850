"""Shared fixtures. Expensive artifacts (a trained checkpoint, an exported graph) are built once
per session and reused by every layer's tests."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ORTMODULE_FALLBACK_POLICY", "FALLBACK_DISABLE")

from pathlib import Path

import pytest

OUTPUT_ROOT = Path(__file__).resolve().parent.parent / "test-output"


def cuda_missing() -> str:
    """Why tests marked ``gpu`` cannot run here ("" when a CUDA device and ONNX Runtime's CUDA
    provider are both available)."""
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    import onnxruntime

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return f"ONNX Runtime has no CUDAExecutionProvider (providers: {onnxruntime.get_available_providers()})"
    return ""


# What trains (ORTModule, eager or compile runs, comparisons, the demo, the workshop) or builds and runs on-device
# training artifacts: marked `train`, the training stack's alone. `make test-current` deselects them
# (-m "not train"); run elsewhere on the current stack they skip, saying why.
TRAIN_FIXTURES = {"tiny_train_run", "tiny_checkpoint", "tiny_comparison", "trained_minilm_run", "trained_minilm_checkpoint",
                  "demo_run", "finished", "comparison", "quick_json", "distil_with_bert_tokenizer",
                  "workshop_home",  # the workshop cache, which the notebooks' committed-defaults runs use
                  "workshop_checkpoint"}  # the workshop's fine-tuned MiniLM in it, which notebooks 03-06 start from
TRAIN_MODULES = {
    "unit/train/test_train.py", "unit/train/test_ortmodule_smoke.py", "unit/train/test_distributed.py", "unit/train/test_compare.py",
    "unit/ondevice/test_ondevice.py", "cli/test_ondevice_cli.py", "unit/ondevice/test_ondevice_web.py", "unit/teaching/test_workshop.py",
    "unit/workflows/test_pipeline.py", "unit/runs/test_layout.py", "unit/train/test_like_for_like.py", "unit/perf/test_bench.py",
    "widgets/test_train_panels.py", "widgets/test_ondevice_panel.py", "widgets/test_workbench.py",
    "widgets/test_encoder_types.py", "ui/test_ondevice_page.py", "ui/test_tour_in_browser.py",
}
TRAIN_NOTEBOOKS = ("00_", "01_", "02_", "06_")  # the notebooks that fine-tune or train on device
# single tests elsewhere that train, or run a training command (refused on the current stack before its own checks)
TRAIN_TESTS = (
    # the training build's `import onnxruntime` line and the fine-tuning load: the training stack's own behaviour
    "unit/core/test_quiet.py::test_import_onnxruntime_prints_no_cuda_home_line_after_workbench",
    "unit/core/test_quiet.py::test_fine_tuning_minilm_loads_without_the_new_head_warning",
    "unit/core/test_quiet.py::test_an_ortmodule_run_raises_no_python_warnings",
    "unit/graph/test_export.py::test_export_after_ortmodule_training_is_plain_onnx",
    "unit/workflows/test_zoo.py::test_inputs_follow_the_model_not_the_tokenizer",
    "unit/workflows/test_zoo.py::test_modernbert_trains_eagerly_and_ortmodule_says_why_it_cannot",
    "unit/workflows/test_zoo.py::test_training_commands_refuse_a_type_outside_the_list_in_one_line",
    "unit/workflows/test_zoo.py::test_ortmodule_fine_tunes_every_other_type_in_onnxruntime",
    "unit/workflows/test_zoo.py::test_modernbert_with_zero_layernorm_biases_trains_under_ortmodule",
    "cli/test_reliability.py::test_train_data_missing",
    "cli/test_reliability.py::test_compare_data_not_utf8_says_save_as_utf8",
    "cli/test_reliability.py::test_ondevice_truncated_safetensors",
    "unit/audit/test_audit.py::test_demo_runs_folder_that_cannot_be_created",
    "cli/test_cli_flags.py::test_bad_settings_are_the_configs_one_line_with_exit_code_2[argv0-",
    "cli/test_cli_flags.py::test_bad_settings_are_the_configs_one_line_with_exit_code_2[argv1-",
    "cli/test_cli_flags.py::test_bad_settings_are_the_configs_one_line_with_exit_code_2[argv4-",
    "cli/test_reliability.py::test_jsonl_error_gives_the_line_number",
    "cli/test_reliability.py::test_demo_unknown_backend_lists_the_valid_ones",
    "cli/test_reliability.py::test_nproc_is_bounded_by_the_cores",
    "cli/test_reliability.py::test_ondevice_absurd_steps_refused_before_any_batch",
    "cli/test_reliability.py::test_config_messages_speak_in_flags",
    "cli/test_reliability.py::test_torchrun_workers_die_with_a_killed_parent",
)


def _trains(item) -> bool:
    rel = Path(str(item.fspath)).resolve().relative_to(Path(__file__).resolve().parent).as_posix()
    if rel in TRAIN_MODULES or TRAIN_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    if (rel + "::" + item.nodeid.split("::", 1)[-1]).startswith(TRAIN_TESTS):
        return True
    if nb := _notebook_of(item, "test_notebook_executes"):
        return nb.startswith(TRAIN_NOTEBOOKS)
    return False


def module_fixture_group(item) -> str | None:
    """The test's module when the test uses a fixture built once per module (an export, a baseline, a
    benchmark's run): `make test` runs pytest-xdist with ``--dist loadgroup``, so every test of that group
    goes to one worker and the fixture is built once, not once per worker. Other tests go to any worker."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d.scope in ("module", "class") for fixturedefs in defs.values() for d in fixturedefs):
        return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before -m reads the markers
def pytest_collection_modifyitems(config, items):
    """Tests that use a module's fixture are grouped by module for pytest-xdist (:func:`module_fixture_group`);
    tests that train get the ``train`` marker (skipped, saying why, on a stack without ORTModule); tests
    marked ``gpu`` skip, saying why, where there is no CUDA; with CUDA they run."""
    for item in items:
        group = module_fixture_group(item) or (DEFAULTS_GROUP if _notebook_of(item, DEFAULTS_TEST) in CHECKPOINT_NOTEBOOKS else None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    train_items = [item for item in items if item.get_closest_marker("train") or _trains(item)]
    for item in train_items:
        item.add_marker(pytest.mark.train)
    if train_items:
        from workbench.doctor.checks import stack

        if stack() == "current":
            for item in train_items:
                item.add_marker(pytest.mark.skip(reason="marked train: the current stack has no ORTModule; "
                                                        "the training stack (make setup, .venv) runs it"))
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = cuda_missing()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"marked gpu: {reason}"))


# A notebook's small run (tests/notebooks: test_notebook_executes, the tiny model) covers nothing that its
# committed-defaults run (test_committed_defaults_write_no_stderr: MiniLM, the same cells and checks and more)
# does not, except where named here: notebook 05's small run audits a user-style file (other column names,
# string labels, a slice column) that its defaults do not read. Where both runs are selected, the small one
# is deselected (pytest counts it as deselected); where the defaults run is not (make test-fast, the current
# stack, -m "not heavy"), the small one runs.
SMALL_RUN_ADDS = ("05_audit_your_own_model",)
DEFAULTS_TEST = "test_committed_defaults_write_no_stderr"
# The notebooks that start from the workshop's fine-tuned checkpoint (workbench.teaching.workshop).
CHECKPOINT_NOTEBOOKS = ("03_export_and_fusion", "04_quantization_drift", "05_audit_your_own_model", "06_on_device_training")
# Their committed-defaults runs share one xdist group: one worker builds the checkpoint once and runs them one
# after another, instead of the other worker waiting on the checkpoint's lock. The other committed-defaults
# runs (notebooks that train or encode on their own) go to either worker.
DEFAULTS_GROUP = "notebooks-from-the-workshop-checkpoint"
_replaced_by_defaults: list[str] = []


def _notebook_of(item, test: str) -> str | None:
    """The notebook a test of tests/notebooks runs (its parameter), for ``test``; None for other tests.
    Read from the item's name: under pytest-xdist the node id of a grouped test ends in ``@group``."""
    name = item.name
    if item.nodeid.split("::", 1)[0].endswith("notebooks/test_notebooks.py") and name.startswith(test + "["):
        return name[len(test) + 1:name.rindex("]")]
    return None


class _Schedule:
    """A plugin: this module's own hook runs before -m deselects; this one after it, and after
    pytest-randomly has shuffled."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        with_defaults = {nb for item in items if (nb := _notebook_of(item, DEFAULTS_TEST))
                         and not item.get_closest_marker("skip")}
        drop = [item for item in items if (nb := _notebook_of(item, "test_notebook_executes")) in with_defaults
                and nb not in SMALL_RUN_ADDS]
        if drop:
            _replaced_by_defaults.extend(_notebook_of(item, "test_notebook_executes") for item in drop)
            config.hook.pytest_deselected(items=drop)
            items[:] = [item for item in items if item not in drop]
        # Longest first: the committed-defaults group (the workshop checkpoint's fine-tune and the runs that
        # start from it), then the other committed-defaults runs (minutes each), then the other tests marked
        # heavy, in their shuffled order, then the rest. pytest-xdist hands out work in this order
        # (pytest_xdist_make_scheduler below), so no worker is left with a long test while the other has
        # nothing to do.
        def rank(item) -> int:
            notebook = _notebook_of(item, DEFAULTS_TEST)
            if notebook:
                return 0 if notebook in CHECKPOINT_NOTEBOOKS else 1
            return 2 if item.get_closest_marker("heavy") else 3

        items.sort(key=rank)


def pytest_configure(config):
    config.pluginmanager.register(_Schedule(), "workbench-schedule")
    share_the_cores(config)


def share_the_cores(config) -> None:
    """With pytest-xdist workers, each worker (and every process it starts: notebook kernels, commands)
    gets its share of the CPUs as ``OMP_NUM_THREADS``, which caps PyTorch and every ONNX Runtime session
    the workbench opens (workbench.core.threads). Two workers on two cores with two threads each spend
    most of their time waiting on each other's threads. Set here, in the controller, before the workers
    start; a value the user set is kept."""
    workers = config.getoption("numprocesses", default=None)
    if not isinstance(workers, int) or workers < 2 or "OMP_NUM_THREADS" in os.environ:
        return
    from workbench.perf.machine_profile import usable_cpus

    share = str(max(1, usable_cpus() // workers))
    os.environ["OMP_NUM_THREADS"] = share
    # torch.compile's inductor compiles in a pool of processes, one per CPU, each importing torch: its share too
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", share)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the work handed out in collection order (the order above: longest first).
    pytest-xdist's own scheduler hands out the groups with the most tests first, which left the
    committed-defaults group (8 tests, the longest unit of work) behind groups of many short tests."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadGroupScheduling

    class InCollectionOrder(LoadGroupScheduling):
        ordered = False

        def _assign_work_unit(self, node):
            if not self.ordered:
                first: dict[str, int] = {}
                for i, nodeid in enumerate(self.collection):
                    first.setdefault(self._split_scope(nodeid), i)
                self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=lambda unit: first[unit[0]]))
                self.ordered = True
            super()._assign_work_unit(node)

    return InCollectionOrder(config, log)


HEAVY_S = 60.0  # a test that takes longer is marked heavy (make test-fast leaves it out)
_unmarked_heavy: list[tuple[str, float]] = []


def pytest_runtest_logreport(report):
    """Note tests whose call took over HEAVY_S that are not marked heavy: the end of the run names them."""
    if report.when == "call" and report.duration > HEAVY_S and "heavy" not in report.keywords:
        _unmarked_heavy.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter):
    if _replaced_by_defaults:
        terminalreporter.write_line("small notebook runs deselected, their committed-defaults runs cover them: "
                                    + ", ".join(sorted(_replaced_by_defaults)))
    if _unmarked_heavy:
        terminalreporter.write_line(f"over {HEAVY_S:.0f} s but not marked heavy (make test-fast runs them): "
                                    + ", ".join(f"{n} ({s:.0f} s)" for n, s in _unmarked_heavy))


def listening_sockets(pid: int) -> set[tuple[str, int]]:
    """``(ip, port)`` of every TCP socket in LISTEN state held by process ``pid`` or its children
    (the operating system's view, not the URL a server prints)."""
    import psutil

    proc = psutil.Process(pid)
    found = set()
    for p in (proc, *proc.children(recursive=True)):
        try:
            conns = p.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        found |= {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return found


@pytest.fixture
def listening():
    """``listening(pid)``: the listening sockets of a process, see :func:`listening_sockets`."""
    return listening_sockets


@pytest.fixture(scope="session")
def quick_data():
    """A small stratified slice of the built-in reviews (same loading code as the real run)."""
    from workbench.data.load import DataConfig, load_data

    return load_data(DataConfig.quick())


@pytest.fixture(scope="session")
def tiny():
    from workbench.models.load import load_model

    return load_model("tiny", dropout=False)


@pytest.fixture(scope="session")
def minilm():
    from workbench.models.load import load_model

    return load_model("minilm")


@pytest.fixture
def output_dir(request) -> Path:
    """A folder under test-output/ named after the test, kept after the run (screenshots, figures)."""
    path = OUTPUT_ROOT / request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---- fixtures for training --------------------------------------------------------
@pytest.fixture(scope="session")
def tiny_train_run(tmp_path_factory):
    """The eager TrainRun behind ``tiny_checkpoint`` (tiny BERT, 8 steps on quick data; seconds)."""
    from workbench.train import TrainConfig, run_training

    run = run_training(TrainConfig.quick(max_steps=8, eval_every=4), "eager", run_dir=tmp_path_factory.mktemp("tiny-train"))
    assert run.status == "ok", run.reason
    return run


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_train_run) -> Path:
    """Folder of a tiny BERT trained a few steps with the eager backend (HF format: config.json,
    model.safetensors, tokenizer files); ``workbench.models.load.load_model(str(folder))`` loads it."""
    return Path(tiny_train_run.checkpoint_dir)


@pytest.fixture(scope="session")
def tiny_comparison(tmp_path_factory):
    """(Comparison, progress events) of eager and ORTModule on the tiny model: same config (10 steps,
    evaluation every 5), trained in this process. Shared by the training, comparison and widget tests."""
    from workbench.train import CompareConfig, TrainConfig, run_comparison

    events = []
    c = run_comparison(TrainConfig.quick(max_steps=10, eval_every=5), CompareConfig(backends=("eager", "ortmodule")),
                       tmp_path_factory.mktemp("tiny-compare"), progress=events.append)
    return c, events


@pytest.fixture(scope="session")
def trained_minilm_run(tmp_path_factory):
    """MiniLM fine-tuned briefly with the eager backend: 40 steps of 16 reviews (max length 64) on
    ``DataConfig.quick()``, lr 1e-4. About 20-30 s on 2 quiet cores; about 0.8 validation accuracy."""
    from workbench.data.load import DataConfig
    from workbench.train import TrainConfig, run_training

    cfg = TrainConfig(model="minilm", data=DataConfig.quick(), max_length=64, batch_size=16, max_steps=40,
                      lr=1e-4, warmup_steps=4, eval_every=0, save_graphs=False)
    run = run_training(cfg, "eager", run_dir=tmp_path_factory.mktemp("minilm-train"))
    assert run.status == "ok", run.reason
    return run


@pytest.fixture(scope="session")
def trained_minilm_checkpoint(trained_minilm_run) -> Path:
    """Folder of the briefly fine-tuned MiniLM (better than chance on the reviews); load it with
    ``workbench.models.load.load_model(str(folder))``."""
    return Path(trained_minilm_run.checkpoint_dir)


# ---- fixtures for export and fusion -----------------------------------------------
@pytest.fixture(scope="session")
def exported_tiny(tmp_path_factory, quick_data):
    """ExportResult of the tiny BERT (eager attention, opset 17, validated on the quick data).

    Its folder holds model.onnx, tokenizer/, validation_examples.jsonl, reference_logits.npy and
    export.json. Treat it as read-only: copy the graph before changing it.
    """
    from workbench.graph import ExportConfig, run_export

    return run_export("tiny", ExportConfig.quick(), tmp_path_factory.mktemp("exported_tiny"), data=quick_data)


@pytest.fixture(scope="session")
def fused_tiny(tmp_path_factory, exported_tiny):
    """FusionReport of ``exported_tiny`` (every variant, quick timing). ``fused_tiny.fused_path``
    is the transformer-optimized graph quantization starts from."""
    from workbench.graph import FusionConfig, run_fusion

    return run_fusion(exported_tiny, FusionConfig.quick(), tmp_path_factory.mktemp("fused_tiny"))


@pytest.fixture(scope="session")
def exported_minilm(tmp_path_factory, minilm, quick_data):
    """ExportResult of the real MiniLM (eager attention, opset 17, 16 validation examples). For
    tests marked slow."""
    from workbench.graph import ExportConfig, run_export

    return run_export(minilm, ExportConfig.quick(validation_examples=16), tmp_path_factory.mktemp("exported_minilm"),
                      data=quick_data)


# ---- fixtures for quantization ----------------------------------------------------
@pytest.fixture(scope="session")
def quant_tiny_baseline(tmp_path_factory, exported_tiny, quick_data):
    """Baseline (FP32 logits, slices, golden set, calibration texts) of ``exported_tiny`` on the
    quick data, with quick timing. Shared by the quantization tests so every variant is scored on
    the same examples."""
    from workbench.quant import BaselineConfig, TimingConfig, prepare_baseline

    return prepare_baseline(exported_tiny, quick_data, tmp_path_factory.mktemp("quant_tiny"),
                            BaselineConfig(timing=TimingConfig.quick(), calibration_samples=64))


@pytest.fixture(scope="session")
def quant_tiny_dynamic(tmp_path_factory, quant_tiny_baseline):
    """QuantResult of dynamic INT8 on ``exported_tiny`` (with per-node errors; n_boot 200)."""
    from workbench.quant import EvalConfig, QuantConfig, run_quantization

    return run_quantization(quant_tiny_baseline, QuantConfig.preset("dynamic"), tmp_path_factory.mktemp("quant_tiny_dynamic"),
                            evaluation=EvalConfig(n_boot=200, node_error_samples=16))


@pytest.fixture(scope="session")
def quant_tiny_static(tmp_path_factory, quant_tiny_baseline):
    """QuantResult of static QDQ INT8 (MinMax, 32 calibration texts) on ``exported_tiny``."""
    from workbench.quant import EvalConfig, QuantConfig, run_quantization

    return run_quantization(quant_tiny_baseline, QuantConfig.preset("static-minmax", calibration={"samples": 32}),
                            tmp_path_factory.mktemp("quant_tiny_static"), evaluation=EvalConfig(n_boot=200, node_error_samples=16))
