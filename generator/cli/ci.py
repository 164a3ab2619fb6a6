"""Commands for catalog changes in CI: ``verify``, ``diff`` and ``goldens``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from backpressure.catalog.errors import CatalogError
from backpressure.generator.cli.options import (
    COMMAND_SETTINGS,
    BadInput,
    Finite,
    SafePath,
    Whole,
    catalog_option,
    jobs_option,
    load,
)
from backpressure.generator.cli.progress import make_progress
from backpressure.generator.paths import ROOT
from backpressure.generator.sweep.run import default_jobs


@click.command("verify", context_settings=COMMAND_SETTINGS)
@click.argument("target")
@click.option(
    "--site",
    "site_dir",
    type=SafePath(file_okay=False, path_type=Path),
    default=Path("site"),
    show_default=True,
    help="Published site a config id, permalink or URL is checked against.",
)
@click.option(
    "--sample",
    type=Whole(min=1),
    default=None,
    help="With a site directory as TARGET: check this many configs, drawn with --seed "
    "(default: every config).",
)
@click.option(
    "--seed",
    type=Whole(0, 2**32 - 1),
    default=0,
    show_default=True,
    help="Seed of the --sample draw.",
)
@click.option(
    "--config-file",
    type=SafePath(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="mkdocs.yml the site was built with (default: the project's).",
)
@catalog_option
def verify_command(
    target: str,
    site_dir: Path,
    sample: int | None,
    seed: int,
    config_file: Path | None,
    catalog_dir: Path | None,
) -> None:
    """Recompute TARGET from the catalog and compare what a reader sees of it.

    TARGET is a site directory (every config, or --sample N of them), a config
    id, permalink, URL or anchored row's URL (checked in --site), a published model JSON file
    (api/models/<model>.json, or one config's object from it), or a rig builder
    link (or its fragment). For each config its line of api/models/<model>.json,
    its anchored row on the GPU x model page, its page and badge where it fits
    (none where it does not) and its hub cells are made again and compared; a
    rig is run again with its seed and its verdict and breaking rate compared.
    Exit 0 when everything matches, 1 on any difference, 2 when a file or link
    cannot be read.
    """
    from backpressure.generator.ci import verify as v
    from backpressure.generator.ci.strict_json import DuplicateKey

    cat = load(catalog_dir)
    if v.is_rig_target(target):
        _verify_rig(cat, target)
        return
    path = Path(target)
    try:
        if path.is_dir():
            checker = _checker(cat, path, config_file)
            outcome = v.verify_site(checker, sample, seed)
        elif target.endswith(".json") and path.is_file():
            try:
                published = v.read_json(path)
            except DuplicateKey as exc:
                click.echo(f"MISMATCH: {path}: tampered: {exc}")
                raise click.exceptions.Exit(1) from exc
            try:
                v.published_ids(published)
            except v.VerifyError as exc:
                raise v.VerifyError(f"{target}: {exc}") from exc
            outcome = v.verify_json(cat, published, _site_url(config_file))
        else:
            cid = v.config_id_of(target)
            if cid is None:
                raise v.VerifyError(
                    f"{target!r} is neither a site directory, a config id, a permalink "
                    "nor a JSON file"
                )
            outcome = v.verify_configs(_checker(cat, site_dir, config_file), [cid])
    except v.VerifyError as exc:
        raise BadInput(str(exc)) from exc
    click.echo(v.render(outcome, sampled=sample is not None))
    if not outcome.matches:
        raise click.exceptions.Exit(1)


def _verify_rig(cat: Any, target: str) -> None:
    """Recompute a rig builder link; exit 1 when its claims do not hold."""
    from backpressure.generator.ci import verify as v

    try:
        rig = v.verify_rig(cat, target)
    except v.VerifyError as exc:
        raise BadInput(str(exc)) from exc
    click.echo(v.render_rig(rig))
    if not rig.holds:
        raise click.exceptions.Exit(1)


def _checker(cat: Any, site: Path, config_file: Path | None) -> Any:
    from backpressure.generator.ci.verify import Checker, VerifyError
    from backpressure.generator.paths import MKDOCS_YML
    from mkdocs.config import load_config

    if not (site / "api" / "models.json").is_file():
        raise VerifyError(f"{site} is not a published site (no api/models.json)")
    cfg = load_config(config_file=str(config_file or MKDOCS_YML))
    return Checker(cat, site, (cfg.site_url or "").rstrip("/"), cfg.site_name)


def _site_url(config_file: Path | None) -> str:
    from backpressure.generator.paths import MKDOCS_YML
    from mkdocs.config import load_config

    cfg = load_config(config_file=str(config_file or MKDOCS_YML))
    return (cfg.site_url or "").rstrip("/")


@click.command("diff", context_settings=COMMAND_SETTINGS)
@click.argument("old")
@click.argument("new")
@click.option(
    "--tolerance",
    type=Finite(min=0, max=10),
    default=0.05,
    show_default=True,
    help="Relative change below which a number has not moved.",
)
@click.option(
    "--work",
    type=SafePath(file_okay=False, path_type=Path),
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

    progress, close = make_progress()
    try:
        moves = run_diff(old, new, work, ROOT, jobs or default_jobs(), tolerance, progress)
    except DiffError as exc:
        raise BadInput(str(exc)) from exc
    except CatalogError as exc:
        raise BadInput("\n".join(str(p) for p in exc.problems)) from exc
    finally:
        close()
    click.echo(markdown(moves, tolerance), nl=False)
    if moves:
        raise click.exceptions.Exit(1)


@click.command("goldens", context_settings=COMMAND_SETTINGS)
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
