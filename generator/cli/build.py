"""``backpressure build``: sweep (or reuse a sweep), then build the site."""

from __future__ import annotations

import time
from pathlib import Path

import click
from backpressure.generator.cli.options import (
    COMMAND_SETTINGS,
    BadInput,
    SafePath,
    catalog_option,
    environment_error,
    jobs_option,
)


def _sweep(
    catalog: Path | None, results: Path | None, out: Path, jobs: int | None, full: bool
) -> Path:
    """The directory holding results.csv and curves.jsonl, running the sweep if needed."""
    if results is not None:
        return results
    # lazy: the sweep pulls in the simulation
    from backpressure.generator import manifest
    from backpressure.generator.cli.progress import make_progress
    from backpressure.generator.site.publish import guard
    from backpressure.generator.sweep.run import default_jobs, run_sweep

    sweep_dir = guard.sibling(out, "sweep")
    guard.check_sweep_dir(sweep_dir)
    if full:
        manifest.invalidate(sweep_dir)  # nothing of the last sweep is reused
    progress, close = make_progress()
    try:
        stats = run_sweep(catalog, sweep_dir, jobs or default_jobs(), progress)
    finally:
        close()
    click.echo(
        f"sweep: {stats.total:,} configs ({stats.fitting:,} fit), {stats.computed:,} computed, "
        f"{stats.reused:,} reused -> {sweep_dir}",
        err=True,
    )
    return sweep_dir


@click.command("build", context_settings=COMMAND_SETTINGS)
@catalog_option
@click.option(
    "--out",
    type=SafePath(file_okay=False, path_type=Path),
    default=Path("site"),
    show_default=True,
    help="Where the site goes: absent, empty or an earlier build; replaced only after a "
    "successful build.",
)
@click.option(
    "--results",
    type=SafePath(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Reuse this sweep output (results.csv, curves.jsonl) instead of sweeping.",
)
@jobs_option
@click.option(
    "--config-file",
    type=SafePath(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="mkdocs.yml to build with (default: the project's).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Build from nothing: sweep every config again and render every page afresh "
    "(ignoring OUT.sweep and OUT.cache).",
)
def build_command(
    catalog_dir: Path | None,
    out: Path,
    results: Path | None,
    jobs: int | None,
    config_file: Path | None,
    full: bool,
) -> None:
    """Sweep the catalog (or reuse --results) and build the static site into --out.

    Only the pages whose inputs changed since the last build are rendered again.
    """
    from backpressure.catalog.errors import CatalogError
    from backpressure.catalog.loader import load_catalog
    from backpressure.generator.paths import MKDOCS_YML
    from backpressure.generator.site.build import build_site
    from backpressure.generator.site.hosting import size_line
    from backpressure.generator.site.publish import guard
    from backpressure.generator.site.publish.assemble import SiteError

    start = time.perf_counter()
    kept = " (the previous site, if any, is unchanged)"
    try:
        out = out.resolve()
        load_catalog(catalog_dir)  # a broken catalog is refused before anything is written
        with guard.build_lock(out):  # held through the sweep, so no two builds mix
            guard.check_outputs(out)
            results_dir = _sweep(catalog_dir, results, out, jobs, full)
            swept = time.perf_counter() - start
            report = build_site(results_dir, out, catalog_dir, config_file or MKDOCS_YML, full=full)
    except CatalogError as exc:
        raise BadInput("\n".join(str(p) for p in exc.problems)) from exc
    except SiteError as exc:
        raise BadInput(f"{exc}{kept}") from exc
    except OSError as exc:  # read-only output, full disk: the machine, not the input
        error = environment_error(exc)
        raise BadInput(f"{error.format_message()}{kept}") from exc
    avg = report.html_bytes / max(report.pages, 1) / 1024
    click.echo(
        f"built {out}: {report.configs:,} configs ({len(report.rendered):,} rendered), "
        f"{report.pages:,} pages (average {avg:.1f} KiB), {report.files:,} files "
        f"({len(report.changed):,} changed, {len(report.removed):,} removed) "
        f"in {time.perf_counter() - start:.1f} s"
    )
    phases = [("sweep", swept)] if results is None else []
    click.echo("  seconds: " + ", ".join(f"{n} {s:.1f}" for n, s in [*phases, *report.phases]))
    size, over = size_line(report.total_bytes, report.files)
    click.echo(f"  {size}")
    if over:
        # the site is complete and published here; a Pages deploy of it would fail
        click.echo(f"backpressure: warning: too large for GitHub Pages: {size}", err=True)
