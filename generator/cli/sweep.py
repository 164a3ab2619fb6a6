"""``backpressure sweep``: every combination into results.csv, with progress."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
from backpressure.catalog.errors import CatalogError
from backpressure.generator.cli.options import BadInput, catalog_option, jobs_option
from backpressure.generator.sweep.run import Progress, default_jobs, run_sweep

PLAIN_EVERY_S = 10.0  # how often a non-terminal gets a progress line


def make_progress(stream: object = None) -> tuple[Progress, object]:
    """A progress callback: a tqdm bar on a terminal, periodic plain lines otherwise."""
    out = stream or sys.stderr
    if getattr(out, "isatty", lambda: False)():
        from tqdm import tqdm  # only a terminal needs the bar

        bar = tqdm(total=0, unit="config", file=out, dynamic_ncols=True)

        def on_tty(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        return on_tty, bar
    start = time.monotonic()
    last = [start - PLAIN_EVERY_S]

    def plain(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < PLAIN_EVERY_S and done < total:
            return
        last[0] = now
        rate = done / max(now - start, 1e-9)
        eta = (total - done) / rate if rate else 0.0
        click.echo(f"sweep: {done}/{total} configs, {rate:.0f}/s, ETA {eta:.0f} s", err=True)

    return plain, None


@click.command("sweep")
@catalog_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("build/sweep"),
    show_default=True,
    help="Output directory.",
)
@jobs_option
def sweep_command(catalog_dir: Path | None, out_dir: Path, jobs: int | None) -> None:
    """Sweep every GPU x model x quant x context into OUT/results.csv."""
    progress, bar = make_progress()
    started = time.monotonic()
    try:
        stats = run_sweep(catalog_dir, out_dir, jobs or default_jobs(), progress)
    except CatalogError as exc:
        raise BadInput("\n".join(str(p) for p in exc.problems)) from exc
    finally:
        if bar is not None:
            bar.close()  # type: ignore[attr-defined]
    took = time.monotonic() - started
    click.echo(
        f"sweep: {stats.total} configs ({stats.fitting} fit), {stats.computed} computed, "
        f"{stats.reused} reused, {took:.1f} s -> {out_dir / 'results.csv'}",
        err=True,
    )
