"""``backpressure simulate``: push load through a scenario and name its bottleneck."""

from __future__ import annotations

import functools
from pathlib import Path

import click
from backpressure.catalog.errors import CatalogError
from backpressure.generator.cli.options import (
    COMMAND_SETTINGS,
    BadInput,
    Finite,
    SafePath,
    catalog_option,
    load,
    positive,
)


@click.command("simulate", context_settings=COMMAND_SETTINGS)
@click.argument("scenario", type=SafePath(dir_okay=False, path_type=Path))
@click.option(
    "--seed",
    type=click.IntRange(0, 2**32 - 1),
    default=None,
    help="mulberry32 seed (default: the scenario's).",
)
@click.option(
    "--rps",
    type=positive(1e7),
    default=None,
    help="Load level in requests/s (default: the scenario's).",
)
@click.option(
    "--duration",
    "duration_s",
    type=Finite(min=0.1, max=86_400),
    default=None,
    help="Simulated seconds per run (default: the scenario's).",
)
@click.option(
    "--ticks",
    "ticks_path",
    type=SafePath(dir_okay=False, path_type=Path),
    default=None,
    help="Write every node's per-tick record (CSV, or JSON lines for .jsonl) at fixed precision.",
)
@click.option(
    "--sweep",
    "do_sweep",
    is_flag=True,
    help="Run the scenario's load levels and report the breaking point.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@catalog_option
def simulate_command(
    scenario: Path,
    seed: int | None,
    rps: float | None,
    duration_s: float | None,
    ticks_path: Path | None,
    do_sweep: bool,
    as_json: bool,
    catalog_dir: Path | None,
) -> None:
    """Simulate SCENARIO (a YAML file) tick by tick and report each node's health.

    Its parts come from the catalog's parts/ folder and an LLM node's capacity
    from its GPUs and models (--catalog, or the bundled catalog).
    """
    from backpressure.catalog.scenario import load_parts, load_scenario
    from backpressure.generator import simulate as sim

    if do_sweep and (rps is not None or ticks_path is not None):
        raise click.UsageError("--sweep runs the scenario's own levels; drop --rps and --ticks")
    cat = load(catalog_dir)
    try:
        parts = load_parts(cat.root / "parts") if (cat.root / "parts").is_dir() else None
        loaded = load_scenario(scenario, parts)
        capacity = functools.partial(sim.served_for, cat=cat)
        spec = sim.build_spec(loaded, rps=rps, duration_s=duration_s, capacity=capacity)
    except CatalogError as exc:
        raise BadInput("\n".join(str(p) for p in exc.problems)) from None
    seed = loaded.scenario.seed if seed is None else seed
    if do_sweep:
        report = sim.run_sweep(spec, loaded.scenario.sweep.levels(), seed)
        text = (
            sim.sweep_json(report, spec, seed)
            if as_json
            else "\n".join(sim.human_sweep(report, spec))
        )
        click.echo(text)
        return
    result = sim.run(spec, seed)
    if ticks_path is not None:
        sim.write_ticks(result, seed, ticks_path)
    click.echo(sim.run_json(result, seed) if as_json else "\n".join(sim.human_run(result, seed)))


if __name__ == "__main__":  # python3 -m generator.cli.simulate ... (without installing)
    simulate_command()
