"""The stage registry: every stage's name, config type, run function, inputs and outputs, in one
table, and runs described in a file (``workbench run plan.yaml``).

    from workbench.workflows.stages import STAGES, DEMO_STAGES, load_plan
    STAGES["quantize"].config      # QuantConfig
    plan = load_plan("plan.yaml")  # a DemoConfig with the plan's configs, or PlanError (one line)

A plan names the demo's stages in order and gives each stage's config fields::

    quick: true                  # start from DemoConfig.quick() (false: the full demo's defaults)
    stages: [doctor, data, fine-tune, export, fuse, quantize, report]   # "search" left out
    config:
      data: {test_fraction: 0.2}  # DataConfig fields
      fine-tune: {max_steps: 20, backends: [eager]}   # TrainConfig fields, plus backends, isolate
      export: {opset: 17}         # ExportConfig fields
      fuse: {}                    # FusionConfig fields
      quantize: {presets: [dynamic], repeats: 10}     # presets, budgets, n_boot, TimingConfig fields
      search: {min_speedup: 1.1}

Other names the fronts use for the same stages (``train``, ``environment``, ``graph``, ...) are
:data:`ALIASES` of these.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..data.load import DataConfig
from ..graph import ExportConfig, FusionConfig
from ..quant import EvalConfig, QuantConfig, SearchConfig
from ..runs import layout
from ..train import TrainConfig
from .demo import DemoConfig


class PlanError(ValueError):
    """A plan file that cannot be run: the message is one line naming the file, the key and the fix."""


def _doctor(*args, **kw):
    from ..doctor.checks import run_doctor

    return run_doctor(*args, **kw)


def _load_data(*args, **kw):
    from ..data.load import load_data

    return load_data(*args, **kw)


def _train(*args, **kw):
    from ..train import run_comparison

    return run_comparison(*args, **kw)


def _export(*args, **kw):
    from ..graph import run_export

    return run_export(*args, **kw)


def _fuse(*args, **kw):
    from ..graph import run_fusion

    return run_fusion(*args, **kw)


def _quantize(*args, **kw):
    from ..quant import run_quantization

    return run_quantization(*args, **kw)


def _search(*args, **kw):
    from ..quant import run_search

    return run_search(*args, **kw)


def _evaluate(*args, **kw):
    from ..quant import evaluate_slices

    return evaluate_slices(*args, **kw)


def _build(*args, **kw):
    from .coverage import build_tiny

    return build_tiny(*args, **kw)


def _report(*args, **kw):
    from ..report import write_run_report

    return write_run_report(*args, **kw)


@dataclass(frozen=True)
class StageSpec:
    """One stage: ``run(input, config, out)``; ``inputs`` are the stages whose results it reads,
    ``outputs`` the run-layout names it writes."""

    name: str
    title: str
    config: Optional[type]
    run: Callable[..., Any]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()


STAGES: dict[str, StageSpec] = {s.name: s for s in (
    StageSpec("doctor", "check the environment", None, _doctor, (), (layout.DOCTOR_FILE,)),
    StageSpec("data", "load the data and its slices", DataConfig, _load_data, (), (layout.DATA_FILE,)),
    StageSpec("fine-tune", "fine-tune with each backend", TrainConfig, _train, ("data",), (layout.TRAIN_DIR,)),
    StageSpec("export", "export to ONNX and validate", ExportConfig, _export, ("data", "fine-tune"), (layout.EXPORT_DIR,)),
    StageSpec("fuse", "fuse with the transformer optimizer", FusionConfig, _fuse, ("export",), (layout.FUSION_DIR,)),
    StageSpec("quantize", "quantize to INT8 and compare slices", QuantConfig, _quantize, ("data", "export"),
              (layout.QUANTIZE_DIR,)),
    StageSpec("search", "search for nodes to keep in FP32", SearchConfig, _search, ("data", "export"), (layout.SEARCH_DIR,)),
    StageSpec("evaluate", "compare FP32 and INT8 slice by slice", EvalConfig, _evaluate, ("data", "quantize")),
    StageSpec("build", "build a tiny model of one architecture (the coverage run)", None, _build, (), ()),
    StageSpec("report", "write report.html and summary.json", None, _report, (), (layout.REPORT_FILE, layout.SUMMARY_FILE)),
)}

# the same stages under the names other fronts show
ALIASES: dict[str, str] = {
    "environment": "doctor", "train": "fine-tune", "fusion": "fuse", "graph": "fuse",
    "data and slices": "data", "export and validate": "export", "slice drift": "evaluate",
}

# the demo's stages, in order (run_demo's list; a test holds the two together)
DEMO_STAGES: tuple[str, ...] = ("doctor", "data", "fine-tune", "export", "fuse", "quantize", "search", "report")
OPTIONAL_IN_DEMO = frozenset({"search"})


def canonical(name: str) -> str:
    """The registry's name for a stage name any front uses; KeyError for an unknown one."""
    name = ALIASES.get(name, name)
    if name not in STAGES:
        raise KeyError(name)
    return name


def _tupled(value: Any) -> Any:
    """YAML/JSON lists become the tuples the configs hold."""
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


def _replace(where: str, obj: Any, values: dict, extra: tuple[str, ...] = ()) -> Any:
    fields = [f.name for f in dataclasses.fields(obj)]
    unknown = [k for k in values if k not in fields and k not in extra]
    if unknown:
        raise PlanError(f"{where}: {type(obj).__name__} has no field {unknown[0]!r}; "
                        f"its fields: {', '.join(fields + list(extra))}")
    own = {k: _tupled(v) for k, v in values.items() if k in fields}
    try:
        return dataclasses.replace(obj, **own)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{where}: {str(exc).splitlines()[0]}") from None


def plan_config(plan: Any, source: str = "plan") -> tuple[DemoConfig, tuple[str, ...]]:
    """A plan (parsed YAML/JSON) -> the DemoConfig it describes and its stage names."""
    if not isinstance(plan, dict):
        raise PlanError(f"{source}: a plan is a mapping with 'stages' and 'config'; got {type(plan).__name__}")
    unknown = sorted(set(plan) - {"quick", "stages", "config"})
    if unknown:
        raise PlanError(f"{source}: unknown key {unknown[0]!r}; a plan has quick, stages, config")
    stages = tuple(plan.get("stages") or DEMO_STAGES)
    bad = [s for s in stages if not isinstance(s, str) or ALIASES.get(s, s) not in STAGES]
    if bad:
        raise PlanError(f"{source}: stages: unknown stage {bad[0]!r}; stages: {', '.join(STAGES)}")
    stages = tuple(canonical(s) for s in stages)
    required = tuple(s for s in DEMO_STAGES if s not in OPTIONAL_IN_DEMO)
    if tuple(s for s in stages if s not in OPTIONAL_IN_DEMO) != required or len(set(stages)) != len(stages):
        raise PlanError(f"{source}: stages: a plan runs the demo's stages in order ({', '.join(DEMO_STAGES)}); "
                        f"only {', '.join(sorted(OPTIONAL_IN_DEMO))} may be left out")
    configs = plan.get("config") or {}
    if not isinstance(configs, dict):
        raise PlanError(f"{source}: config: a mapping of stage name to its fields; got {type(configs).__name__}")
    cfg = DemoConfig.quick() if plan.get("quick", False) else DemoConfig.default()
    demo: dict[str, Any] = {"search": "search" in stages}
    for key, values in configs.items():
        name = ALIASES.get(key, key)
        where = f"{source}: config.{key}"
        if name not in STAGES:
            raise PlanError(f"{where}: no such stage; stages: {', '.join(STAGES)}")
        if not isinstance(values, dict):
            raise PlanError(f"{where}: a mapping of field to value; got {type(values).__name__}")
        values = dict(values)
        if name == "data":
            demo["train"] = _replace(where, demo.get("train", cfg.train), {"data": _replace(where, cfg.train.data, values)})
        elif name == "fine-tune":
            for k in ("backends", "isolate"):
                if k in values:
                    demo[k] = _tupled(values.pop(k))
            demo["train"] = _replace(where, demo.get("train", cfg.train), values)
        elif name == "export":
            demo["export"] = _replace(where, cfg.export, values)
        elif name == "fuse":
            demo["fusion"] = _replace(where, cfg.fusion, values)
        elif name == "quantize":
            own = {"presets": "quant_presets", "budget_overall": "budget_overall",
                   "budget_per_slice": "budget_per_slice", "n_boot": "n_boot"}
            for k, field in own.items():
                if k in values:
                    demo[field] = _tupled(values.pop(k))
            demo["timing"] = _replace(where, cfg.timing, values)
        elif name == "search":
            if set(values) - {"min_speedup"}:
                raise PlanError(f"{where}: the demo's search takes min_speedup only; got {sorted(values)}")
            demo.update(values)
        elif values:
            raise PlanError(f"{where}: the {name} stage takes no config; remove it")
    try:
        return dataclasses.replace(cfg, **demo), stages
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{source}: {str(exc).splitlines()[0]}") from None


def read_plan(path: str | Path) -> Any:
    """The parsed plan file: YAML (``.yaml``/``.yml``) or JSON."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the plan ({exc.strerror or exc}); give an existing .yaml or .json file") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            return yaml.safe_load(text)
        return json.loads(text)
    except Exception as exc:  # noqa: BLE001 - yaml's and json's errors both become the one line
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PlanError(f"{path}: not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'} ({first})") from None


def load_plan(path: str | Path) -> tuple[DemoConfig, tuple[str, ...]]:
    """``plan_config(read_plan(path))``: the DemoConfig and the stage names of a plan file."""
    return plan_config(read_plan(path), str(path))
