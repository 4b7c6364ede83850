"""Every config documents itself: each field of each dataclass named ``*Config`` or ``*Budget`` in
``workbench/`` carries a one-line help in its metadata (the command line's ``--help``, the panels'
tooltips and the generated config reference all read it through ``field_help``)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

from workbench.core.options import field_help

ROOT = Path(__file__).resolve().parents[2]


def _is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Name) and target.id == "dataclass") or (
        isinstance(target, ast.Attribute) and target.attr == "dataclass")


def config_classes() -> list[tuple[str, str]]:
    """``(module, class name)`` of every top-level dataclass named *Config or *Budget in workbench/."""
    found = []
    for path in sorted((ROOT / "workbench").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in tree.body:
            if (isinstance(node, ast.ClassDef) and node.name.endswith(("Config", "Budget"))
                    and any(_is_dataclass_decorator(d) for d in node.decorator_list)):
                found.append((module, node.name))
    return found


CONFIGS = config_classes()


def test_the_search_finds_the_configs() -> None:
    names = {name for _, name in CONFIGS}
    assert {"EmbedAuditConfig", "EmbedBudget", "SearchConfig", "TrainConfig", "DemoConfig", "CompareConfig"} <= names


@pytest.mark.parametrize(("module", "name"), CONFIGS, ids=[f"{m}.{n}" for m, n in CONFIGS])
def test_every_field_has_help(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert dataclasses.is_dataclass(cls), f"{module}.{name} is not a dataclass"
    missing = [f.name for f in dataclasses.fields(cls) if not field_help(cls, f.name).strip()]
    assert not missing, (f"{module}.{name}: fields without help: {', '.join(missing)}; give each "
                         f'field(default=..., metadata={{"help": "..."}})')


@pytest.mark.parametrize(("module", "name"), CONFIGS, ids=[f"{m}.{n}" for m, n in CONFIGS])
def test_help_is_one_line(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    multi = [f.name for f in dataclasses.fields(cls) if "\n" in field_help(cls, f.name)]
    assert not multi, f"{module}.{name}: help of {', '.join(multi)} spans lines; keep it to one"
