"""Runs described in a file (``workbench run plan.yaml``): the demo's stages in order (the registry's names) and
each stage's config fields::

    quick: true                  # start from DemoConfig.quick() (false: the full demo's defaults)
    stages: [doctor, data, fine-tune, export, fuse, quantize, report]   # "search" left out
    config:
      data: {test_fraction: 0.2}  # DataConfig fields
      fine-tune: {max_steps: 20, backends: [eager]}   # TrainConfig fields, plus backends, isolate
      export: {opset: 17}         # ExportConfig fields
      fuse: {}                    # FusionConfig fields
      quantize: {presets: [dynamic], repeats: 10}     # presets, budgets, n_boot, TimingConfig fields
      search: {min_speedup: 1.1}
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .demo import DemoConfig
from .stages import DEMO_STAGES, ROUTES, STAGES


class PlanError(ValueError):
    """A plan file that cannot be run: the message is one line naming the file, the key and the fix."""


OPTIONAL_IN_DEMO = ROUTES["demo"].optional
# a stage's plan entry: the DemoConfig fields its keys name ({key: field}), and the DemoConfig config its other keys are fields of
PLAN_FIELDS: dict[str, tuple[dict[str, str], str | None]] = {
    "fine-tune": ({"backends": "backends", "isolate": "isolate"}, "train"), "export": ({}, "export"), "fuse": ({}, "fusion"),
    "quantize": ({"presets": "quant_presets", "budget_overall": "budget_overall", "budget_per_slice": "budget_per_slice",
                  "n_boot": "n_boot"}, "timing"),
    "search": ({"min_speedup": "min_speedup"}, None),
}


def _tupled(value: Any) -> Any:
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


def _model_source(where: str, model: str) -> str:
    from ..models.hub import model_source
    from ..models.load import ModelError

    try:
        return model_source(model)
    except ModelError as exc:
        raise PlanError(f"{where}: {exc}") from None


def plan_config(plan: Any, source: str = "plan") -> tuple[DemoConfig, tuple[str, ...]]:
    """A parsed plan -> its DemoConfig and stage names, or a one-line :class:`PlanError`."""
    if not isinstance(plan, dict):
        raise PlanError(f"{source}: a plan is a mapping with 'stages' and 'config'; got {type(plan).__name__}")
    unknown = sorted(set(plan) - {"quick", "stages", "config"})
    if unknown:
        raise PlanError(f"{source}: unknown key {unknown[0]!r}; a plan has quick, stages, config")
    stages = tuple(plan.get("stages") or DEMO_STAGES)
    bad = [s for s in stages if not isinstance(s, str) or s not in STAGES]
    if bad:
        raise PlanError(f"{source}: stages: unknown stage {bad[0]!r}; stages: {', '.join(STAGES)}")
    required = tuple(s for s in DEMO_STAGES if s not in OPTIONAL_IN_DEMO)
    if tuple(s for s in stages if s not in OPTIONAL_IN_DEMO) != required or len(set(stages)) != len(stages):
        raise PlanError(f"{source}: stages: a plan runs the demo's stages in order ({', '.join(DEMO_STAGES)}); "
                        f"only {', '.join(sorted(OPTIONAL_IN_DEMO))} may be left out")
    configs = plan.get("config") or {}
    if not isinstance(configs, dict):
        raise PlanError(f"{source}: config: a mapping of stage name to its fields; got {type(configs).__name__}")
    cfg = DemoConfig.quick() if plan.get("quick", False) else DemoConfig.default()
    demo: dict[str, Any] = {"search": "search" in stages}
    for name, values in configs.items():
        where = f"{source}: config.{name}"
        if name not in STAGES:
            raise PlanError(f"{where}: no such stage; stages: {', '.join(STAGES)}")
        if not isinstance(values, dict):
            raise PlanError(f"{where}: a mapping of field to value; got {type(values).__name__}")
        values = dict(values)
        if name == "data":  # the data's config is the training config's
            name, values = "fine-tune", {"data": _replace(where, cfg.train.data, values)}
        own, home = PLAN_FIELDS.get(name, ({}, None))
        demo.update({own[k]: _tupled(values.pop(k)) for k in list(values) if k in own})
        if isinstance(values.get("model"), str):
            values["model"] = _model_source(where, values["model"])
        if home is not None:
            demo[home] = _replace(where, demo.get(home, getattr(cfg, home)), values)
        elif values:
            raise PlanError(f"{where}: the {name} stage takes {', '.join(own) or 'no config'}; remove {', '.join(sorted(values))}")
    try:
        return dataclasses.replace(cfg, **demo), stages
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{source}: {str(exc).splitlines()[0]}") from None


def read_plan(path: str | Path) -> Any:
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
    return plan_config(read_plan(path), str(path))
