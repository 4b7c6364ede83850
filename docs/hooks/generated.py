"""Pages that cannot drift from the code, and the mkdocs hook that includes files.

The command-line page (docs/cli.md) holds, between its markers, text generated from the code and
committed, so it reads the same on the repository as on the site; ``python docs/hooks/generated.py``
writes it again, and a test fails when the committed text is not what the code generates:

- ``<!-- cli-reference -->`` ... ``<!-- /cli-reference -->``: the ``--help`` of ``workbench`` and of every
  sub-command, taken from the argparse parser the command line itself uses (``workbench.cli.app.build_parser``).
- ``<!-- config-reference -->`` ... ``<!-- /config-reference -->``: one table per config the commands take
  (the keys of a ``--config FILE``): each field's default and its help, read from the field's own metadata
  (``workbench.core.options.config_fields_doc``); for ``QuantConfig``, the methods each field applies to.

The figures every page quotes (``<!-- figure: NAME -->`` and ``<!-- results-table: NAME -->``) come from committed
result files and the code by the same rule: ``docs/hooks/figures.py``, written again by the same command.

The hook: ``<!-- include: PATH -->`` becomes the text of PATH (relative to the repository), so a page and a
file at the repository's root (CONTRIBUTING.md) say the same thing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLI_PAGE = REPO / "docs" / "cli.md"
INCLUDE = re.compile(r"<!-- include: ([^ ]+) -->")


def _sub_parsers(parser: argparse.ArgumentParser, prefix: str = "workbench"):
    """(full command, its one-line summary, parser) for every sub-command, depth first, in the order
    they were registered."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", summaries.get(name), sub
                yield from _sub_parsers(sub, f"{prefix} {name}")


def cli_reference() -> str:
    """Markdown: the top-level help, then one section per sub-command with its summary and help."""
    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: fix it
    from workbench.cli.app import build_parser

    parser = build_parser()
    parts = ["```text", parser.format_help().rstrip(), "```", ""]
    for command, summary, sub in _sub_parsers(parser):
        parts += [f"## `{command}`", ""]
        if summary:
            parts += [summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else "."), ""]
        parts += ["```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def _config_classes() -> list[type]:
    """Every config a command takes flags from, and the configs nested in them, in the order first met."""
    import dataclasses
    import typing

    from workbench.cli.app import build_parser
    from workbench.cli.config_file import CLASSES

    found: dict[str, type] = {}

    def add(cls: type) -> None:
        if cls.__name__ in found:
            return
        found[cls.__name__] = cls
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            t = hints.get(f.name)
            if isinstance(t, type) and dataclasses.is_dataclass(t):
                add(t)

    for _, _, sub in _sub_parsers(build_parser()):
        for cls in (sub.get_default(CLASSES) or {}).values():
            add(cls)
    return list(found.values())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_reference() -> str:
    """Markdown: one table per config (field, default, meaning; QuantConfig adds the methods each field applies to)."""
    from workbench.core.options import config_fields_doc
    from workbench.quant import QuantConfig, applies_to

    parts = []
    for cls in _config_classes():
        methods = cls is QuantConfig
        parts += [f"### `{cls.__name__}`", "", f"`{cls.__module__}.{cls.__name__}`", "",
                  "| field | default | " + ("applies to | " if methods else "") + "meaning |",
                  "|---|---|" + ("---|" if methods else "") + "---|"]
        for d in config_fields_doc(cls):
            applies = f" {', '.join(applies_to(d.name))} |" if methods else ""
            parts.append(f"| `{d.name}` | `{_cell(d.default)}` |{applies} {_cell(d.help) or '–'} |")
        parts.append("")
    return "\n".join(parts)


def generated_blocks() -> dict[str, str]:
    """{marker name: the text the code generates for it}."""
    return {"cli-reference": cli_reference(), "config-reference": config_reference()}


def with_blocks(page: str, blocks: dict[str, str]) -> str:
    """``page`` with the text between each ``<!-- name -->`` and ``<!-- /name -->`` replaced by ``blocks[name]``."""
    for name, text in blocks.items():
        start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
        if start not in page or end not in page:
            raise ValueError(f"{CLI_PAGE.name} has no {start} ... {end} block")
        head, rest = page.split(start, 1)
        page = f"{head}{start}\n\n{text.strip()}\n\n{end}{rest.split(end, 1)[1]}"
    return page


def on_page_markdown(markdown: str, page, config, files) -> str:
    return INCLUDE.sub(lambda m: (REPO / m.group(1)).read_text(), markdown)


def figures_module():
    """docs/hooks/figures.py as a module (loaded by its path once: mkdocs and the tests load this file by path too)."""
    if "workbench_doc_figures" not in sys.modules:
        spec = importlib.util.spec_from_file_location("workbench_doc_figures", Path(__file__).with_name("figures.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["workbench_doc_figures"]


if __name__ == "__main__":  # write the generated blocks of the command-line page and every page's figures again
    CLI_PAGE.write_text(with_blocks(CLI_PAGE.read_text(), generated_blocks()))
    print(f"wrote {CLI_PAGE.relative_to(REPO)}")
    for path in figures_module().write_figures():
        print(f"wrote the figures of {path.relative_to(REPO)}")
