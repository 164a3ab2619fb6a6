"""``backpressure sweep``: every combination into results.csv, with progress."""

from __future__ import annotations

import time
from pathlib import Path

import click
from backpressure.catalog.errors import CatalogError
from backpressure.generator.cli.options import (
    COMMAND_SETTINGS,
    BadInput,
    SafePath,
    catalog_option,
    jobs_option,
)
from backpressure.generator.cli.progress import make_progress
from backpressure.generator.sweep.run import default_jobs, run_sweep


@click.command("sweep", context_settings=COMMAND_SETTINGS)
@catalog_option
@click.option(
    "--out",
    "out_dir",
    type=SafePath(file_okay=False, path_type=Path),
    default=Path("build/sweep"),
    show_default=True,
    help="Output directory.",
)
@jobs_option
def sweep_command(catalog_dir: Path | None, out_dir: Path, jobs: int | None) -> None:
    """Sweep every GPU x model x quant x context into OUT/results.csv."""
    progress, close = make_progress()
    started = time.monotonic()
    try:
        stats = run_sweep(catalog_dir, out_dir, jobs or default_jobs(), progress)
    except CatalogError as exc:
        raise BadInput("\n".join(str(p) for p in exc.problems)) from exc
    finally:
        close()
    took = time.monotonic() - started
    click.echo(
        f"sweep: {stats.total} configs ({stats.fitting} fit), {stats.computed} computed, "
        f"{stats.reused} reused, {took:.1f} s -> {out_dir / 'results.csv'}",
        err=True,
    )
