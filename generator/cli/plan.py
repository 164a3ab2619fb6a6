"""``backpressure plan``: which hardware serves a model at a target rate, and what it costs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
from backpressure.generator.cli.options import (
    COMMAND_SETTINGS,
    BadInput,
    SafePath,
    Whole,
    catalog_option,
    jobs_option,
    load,
)
from backpressure.generator.cli.progress import make_progress

if TYPE_CHECKING:
    from backpressure.catalog.loader import Catalog
    from backpressure.generator.plan.frame import Sweep

# Where a sweep output is looked for when --sweep is not given: `backpressure
# build`'s (beside the default site) first, then `backpressure sweep`'s default.
DEFAULT_SWEEPS = (Path("site.sweep"), Path("build/sweep"))
# economics.BASES, spelled out so that `backpressure` starts without pandas (a test
# checks that the two agree).
BASES = ("auto", "rental", "owned")


def _quants(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--quant a --quant b`` and ``--quant a,b`` alike."""
    return tuple(q.strip() for v in values for q in v.split(",") if q.strip())


def _sweep_dir(given: Path | None) -> Path | None:
    from backpressure.generator.results_io import RESULTS

    if given is not None:
        if not (given / RESULTS).is_file():
            raise BadInput(f"--sweep {given}: no {RESULTS} in it")
        return given
    return next((d for d in DEFAULT_SWEEPS if (d / RESULTS).is_file()), None)


def _stale(cat: Catalog, sweep: Sweep) -> int:
    """How many of the sweep's rows were computed from another catalog or code."""
    from backpressure.generator.keys import InputKeys
    from backpressure.generator.sweep.combos import Combo

    if not sweep.inputs or sweep.results.empty:
        return 0
    keys = InputKeys(cat)
    cols = ["config_id", "gpu", "model", "quant", "runtime", "context", "kv_dtype"]
    stale = 0
    for cid, gpu, model, quant, runtime, ctx, kv in sweep.results[cols].itertuples(index=False):
        combo = Combo(str(gpu), str(model), str(quant), str(runtime), int(ctx), str(kv))
        # keys.Config declares its fields settable; a frozen Combo is what the sweep passes too
        stale += sweep.inputs.get(str(cid)) != keys.cache_key(combo)
    return stale


def _read(cat: Catalog, where: Path | None, model: str | None, device: str | None) -> Sweep | None:
    """The sweep output's rows for the question, with a warning for stale ones."""
    from backpressure.generator.plan.frame import read_sweep

    if where is None:
        return None
    try:
        sweep = read_sweep(where, model=model, device=device)
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}; run `backpressure sweep --out {where}`") from exc
    if n := _stale(cat, sweep):
        click.echo(
            f"plan: warning: {n:,} of the rows read from {where} were computed from "
            f"another catalog or code; `backpressure sweep --out {where}` updates them",
            err=True,
        )
    return sweep


@click.command("plan", context_settings=COMMAND_SETTINGS)
@click.option("--model", help="Catalog model id or Hugging Face repo id to plan for.")
@click.option("--rps", type=float, help="Target rate [requests/s] (needed with --model).")
@click.option(
    "--device", help="A GPU or rig id: without --model, what it serves best; with it, only it."
)
@click.option(
    "--context",
    type=int,
    help="Context tokens the server must offer (default: the smallest swept one that holds "
    "a request).",
)
@click.option("--prompt-tokens", type=int, help="Prompt tokens per request (default: the sweep's).")
@click.option("--output-tokens", type=int, help="Output tokens per request (default: the sweep's).")
@click.option("--ttft-p99-ms", type=float, help="TTFT p99 budget [ms] (default: the sweep's).")
@click.option(
    "--tpot-ms", type=float, help="Mean TPOT each user must see at the planned load [ms]."
)
@click.option(
    "--quant", "quants", multiple=True, help="Only these quants (repeat, or comma-separated)."
)
@click.option("--max-per-hour", type=float, help="Budget for all replicas [USD/hour].")
@click.option(
    "--cost-basis",
    type=click.Choice(BASES),
    default="auto",
    show_default=True,
    help="auto: rental where priced, else owned; or rental / owned only.",
)
@click.option(
    "--sweep",
    "sweep_dir",
    type=SafePath(file_okay=False, path_type=Path),
    default=None,
    help="Sweep output to read (default: site.sweep, then build/sweep).",
)
@click.option(
    "--top",
    type=Whole(min=0),
    default=20,
    show_default=True,
    help="Plans the table shows (0: all; --json always lists all).",
)
@jobs_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@catalog_option
def plan_command(
    model: str | None,
    rps: float | None,
    device: str | None,
    context: int | None,
    prompt_tokens: int | None,
    output_tokens: int | None,
    ttft_p99_ms: float | None,
    tpot_ms: float | None,
    quants: tuple[str, ...],
    max_per_hour: float | None,
    cost_basis: str,
    sweep_dir: Path | None,
    top: int,
    jobs: int | None,
    as_json: bool,
    catalog_dir: Path | None,
) -> None:
    """Devices, rigs and quants that serve --model at --rps, with replicas and cost.

    With --device alone: what that device serves best, per model and context.
    Exits 1 when no catalog config meets the target (the closest are named).
    """
    from backpressure.generator.plan.query import PlanError, Request, answer, check
    from backpressure.generator.plan.report import answer_json, device_lines, plan_lines
    from backpressure.generator.sweep.run import default_jobs

    cat = load(catalog_dir)
    req = Request(
        model,
        device,
        rps,
        context,
        prompt_tokens,
        output_tokens,
        ttft_p99_ms,
        tpot_ms,
        _quants(quants),
        max_per_hour,
        cost_basis,  # type: ignore[arg-type]  # click.Choice(BASES) checked it
    )
    try:
        question = check(cat, req)
    except PlanError as exc:
        raise BadInput(str(exc)) from exc
    sweep = _read(cat, _sweep_dir(sweep_dir), question.model, question.device)
    progress, close = make_progress()
    started = time.monotonic()

    def notify(message: str) -> None:
        click.echo(f"plan: {message}", err=True)

    try:
        result = answer(cat, question, sweep, jobs or default_jobs(), progress, notify)
    except PlanError as exc:
        raise BadInput(str(exc)) from exc
    finally:
        close()
    if result.simulated:
        took = time.monotonic() - started
        notify(f"computed {result.simulated:,} configs in {took:.1f} s")
    if as_json:
        click.echo(
            json.dumps(answer_json(cat, result), indent=2, sort_keys=True, ensure_ascii=False)
        )
    else:
        lines = plan_lines(cat, result, top) if question.is_plan else device_lines(cat, result)
        click.echo("\n".join(lines))
    if result.plan is not None and result.plan.plans.empty:
        raise click.exceptions.Exit(1)
