"""Commands for catalog changes in CI: ``verify``, ``diff`` and ``goldens``."""

from __future__ import annotations

from pathlib import Path

import click
from backpressure.catalog.errors import CatalogError
from backpressure.generator.cli.options import BadInput, catalog_option, jobs_option, load
from backpressure.generator.cli.sweep import make_progress
from backpressure.generator.paths import ROOT
from backpressure.generator.sweep.run import default_jobs


@click.command("verify")
@click.argument("target")
@click.option(
    "--site",
    "site_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("site"),
    show_default=True,
    help="Published site holding api/configs/<id>.json (for ids and permalinks).",
)
@catalog_option
def verify_command(target: str, site_dir: Path, catalog_dir: Path | None) -> None:
    """Recompute TARGET (config id, permalink, URL, published JSON or rig builder link) and compare.

    Exit 0 when the fingerprint and every published number match (for a rig
    link: its verdict and breaking rate), 1 otherwise, 2 on a malformed target.
    """
    from backpressure.generator.ci.verify import (
        VerifyError,
        is_rig_target,
        render,
        render_rig,
        resolve_target,
        verify,
        verify_rig,
    )

    cat = load(catalog_dir)
    if is_rig_target(target):
        try:
            rig = verify_rig(cat, target)
        except VerifyError as exc:
            raise BadInput(str(exc)) from exc
        click.echo(render_rig(rig))
        if not rig.holds:
            raise click.exceptions.Exit(1)
        return
    try:
        cid, published = resolve_target(target, site_dir)
        outcome = verify(cat, cid, published)
    except VerifyError as exc:
        raise BadInput(str(exc)) from exc
    click.echo(render(outcome))
    if not outcome.matches:
        raise click.exceptions.Exit(1)


@click.command("diff")
@click.argument("old")
@click.argument("new")
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0, max=10),
    default=0.05,
    show_default=True,
    help="Relative change below which a number has not moved.",
)
@click.option(
    "--work",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("build/diff"),
    show_default=True,
    help="Sweep cache directory.",
)
@jobs_option
def diff_command(old: str, new: str, tolerance: float, work: Path, jobs: int | None) -> None:
    """Configs whose verdict, slots or breaking points moved from OLD to NEW.

    OLD and NEW are catalog directories or git refs. Prints a Markdown table;
    exit 0 when nothing moved, 1 when something did.
    """
    from backpressure.generator.ci.diff import DiffError, markdown, run_diff

    progress, _ = make_progress()
    try:
        moves = run_diff(old, new, work, ROOT, jobs or default_jobs(), tolerance, progress)
    except DiffError as exc:
        raise BadInput(str(exc)) from exc
    except CatalogError as exc:
        raise BadInput("\n".join(str(p) for p in exc.problems)) from exc
    click.echo(markdown(moves, tolerance), nl=False)
    if moves:
        raise click.exceptions.Exit(1)


@click.command("goldens")
@click.option(
    "--update",
    is_flag=True,
    help="Rewrite the goldens (the commit must say why the old numbers were wrong).",
)
@catalog_option
def goldens_command(update: bool, catalog_dir: Path | None) -> None:
    """Check the frozen goldens against a recomputation (exit 1 on any difference)."""
    from backpressure.generator.ci import goldens

    cat = load(catalog_dir)
    if update:
        changed = goldens.update(cat)
        click.echo(f"goldens: rewrote {', '.join(changed)}" if changed else "goldens: unchanged")
        return
    diffs = goldens.check(cat)
    for d in diffs:
        click.echo(d.diff, nl=False)
    if diffs:
        click.echo(f"goldens: {len(diffs)} file(s) differ; see above", err=True)
        raise click.exceptions.Exit(1)
    click.echo("goldens: all match")
