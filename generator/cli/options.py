"""Pieces every command shares: the error that exits 2, catalog loading, common flags."""

from __future__ import annotations

from pathlib import Path

import click
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.loader import Catalog, load_catalog


class BadInput(click.ClickException):
    """One clear line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        """Print the message as one line per problem, prefixed with the program name."""
        click.echo(f"backpressure: error: {self.format_message()}", err=True)


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
