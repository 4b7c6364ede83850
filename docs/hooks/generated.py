"""mkdocs hook: pages that cannot drift from the code.

- ``<!-- cli-reference -->`` becomes the ``--help`` of ``workbench`` and of every sub-command,
  taken from the argparse parser the command line itself uses (``workbench.cli.app.build_parser``).
- ``<!-- include: PATH -->`` becomes the text of PATH (relative to the repository), so a page and a
  file at the repository's root (CONTRIBUTING.md) say the same thing.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLI_MARKER = "<!-- cli-reference -->"
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
    os.environ.setdefault("COLUMNS", "100")  # argparse wraps at the terminal's width: fix it
    from workbench.cli.app import build_parser

    parser = build_parser()
    parts = ["```text", parser.format_help().rstrip(), "```", ""]
    for command, summary, sub in _sub_parsers(parser):
        parts += [f"## `{command}`", ""]
        if summary:
            parts += [summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else "."), ""]
        parts += ["```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    return INCLUDE.sub(lambda m: (REPO / m.group(1)).read_text(), markdown)
