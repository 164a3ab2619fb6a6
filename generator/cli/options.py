"""Pieces every command shares: the error that exits 2, catalog loading, common flags."""

from __future__ import annotations

import re
from pathlib import Path

import click
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.loader import Catalog, load_catalog


class BadInput(click.ClickException):
    """One clear line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        """Print the message as one line per problem, each prefixed with the program name."""
        for line in self.format_message().splitlines():
            click.echo(f"backpressure: error: {line}", err=True)


def load(catalog_dir: Path | None) -> Catalog:
    """Load the catalog or fail with every problem, one per line."""
    try:
        return load_catalog(catalog_dir)
    except CatalogError as exc:
        raise BadInput("\n".join(str(p) for p in exc.problems)) from exc


catalog_option = click.option(
    "--catalog",
    "catalog_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Catalog directory (default: the bundled catalog).",
)

jobs_option = click.option(
    "--jobs",
    type=click.IntRange(min=1, max=256),
    default=None,
    help="Worker processes (default: one per core).",
)


_CONTEXT = re.compile(r"(\d+)([kKmM]?)")
_SUFFIX = {"": 1, "k": 1024, "m": 1024 * 1024}


class ContextTokens(click.ParamType[int]):
    """A context length in tokens, as a number or as the site writes it: ``8k``, ``128k``, ``1M``.

    ``k`` is 1,024 tokens and ``M`` 1,048,576, as model configs count contexts
    (an 8k context is 8,192 tokens).
    """

    name = "tokens"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        """The token count, or a usage error naming the value."""
        if isinstance(value, int):
            return value
        text = str(value).strip().replace(",", "").replace("_", "")
        match = _CONTEXT.fullmatch(text)
        tokens = int(match.group(1)) * _SUFFIX[match.group(2).lower()] if match else 0
        if tokens < 1:
            self.fail(f"{value!r} is not a context length (tokens, or 8k, 128k, 1M)", param, ctx)
        return tokens


CONTEXT = ContextTokens()
