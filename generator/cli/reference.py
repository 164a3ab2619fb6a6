"""docs/cli.md's flag lists, generated from each command's ``--help`` (``make cli-docs``).

The page's prose is written by hand; each block between ``<!-- help: NAME -->``
and ``<!-- /help -->`` is replaced by ``backpressure NAME --help`` at a fixed
width, so the reference cannot drift from the code (a test regenerates it and
compares exactly, defaults included).
"""

from __future__ import annotations

import re
import sys

import click
from backpressure.generator.cli.main import cli
from backpressure.generator.paths import ROOT

DOC = ROOT / "docs" / "cli.md"
WIDTH = 88  # fixed, so the text does not depend on the terminal it is made in
BLOCK = re.compile(r"(<!-- help: (?P<name>[a-z]+) -->\n).*?(<!-- /help -->)", re.DOTALL)


def help_text(name: str) -> str:
    """``backpressure NAME --help`` as printed at :data:`WIDTH` columns."""
    command = cli.commands[name]
    parent = click.Context(
        cli,
        info_name="backpressure",
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        **cli.context_settings,
    )
    ctx = click.Context(
        command,
        info_name=name,
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        **command.context_settings,
    )
    return command.get_help(ctx)


def render(doc: str) -> str:
    """``doc`` with every help block regenerated."""

    def block(m: re.Match[str]) -> str:
        return f"{m.group(1)}```text\n{help_text(m.group('name'))}\n```\n{m.group(3)}"

    return BLOCK.sub(block, doc)


def documented(doc: str) -> list[str]:
    """The commands ``doc`` has a help block for, in order."""
    return [m.group("name") for m in BLOCK.finditer(doc)]


def main(argv: list[str] | None = None) -> int:
    """Rewrite docs/cli.md (``--check``: exit 1 if it is not what the code generates)."""
    args = sys.argv[1:] if argv is None else argv
    doc = DOC.read_text(encoding="utf-8")
    new = render(doc)
    missing = sorted(set(cli.commands) - set(documented(doc)))
    if missing:
        click.echo(f"{DOC}: no help block for {', '.join(missing)}", err=True)
        return 1
    if args == ["--check"]:
        if new != doc:
            click.echo(f"{DOC} is stale: run make cli-docs", err=True)
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
