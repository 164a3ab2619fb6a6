"""Plain functions behind ``backpressure simulate``: scenario in, engine run, text out."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backpressure.catalog.errors import CatalogError, Problem
from backpressure.catalog.scenario import (
    AppPart,
    DatabasePart,
    LlmPart,
    LoadedScenario,
    Part,
    QueuePart,
)
from backpressure.engine.results import CapacityResult
from backpressure.engine.rng import mulberry32
from backpressure.engine.serving.model import Scheduler, StepCost
from backpressure.engine.serving.spec import pool_blocks, requests_held
from backpressure.engine.sim.model import TICK_S, LlmSpec, NodeKind, NodeSpec, Rules, SimSpec
from backpressure.engine.sim.queueing import Discipline
from backpressure.engine.sim.records import RunReport, SweepReport, TickRow
from backpressure.engine.sim.run import SimResult, simulate, sweep, tick_rows
from backpressure.engine.sim.traffic import Arrivals, Shape, SourceSpec
from backpressure.engine.sim.verdict import fmt_ms, fmt_rps

if TYPE_CHECKING:
    from backpressure.catalog.loader import Catalog


@dataclass(frozen=True, slots=True)
class Served:
    """A costed config as a model server: its capacity, its scheduler's limits, its step cost.

    ``cost`` is None where the device has no bandwidth or FLOPS figure.
    """

    capacity: CapacityResult
    scheduler: Scheduler
    cost: StepCost | None


Capacity = Callable[..., Served]

# Decimal places per tick-file column: counts to 1/1000 request, utilization and
# budget to 0.01 %, times to 0.1 ms. Every float is rounded to these before it is
# written, so the file's bytes do not depend on the last bits of any computation.
TICK_DECIMALS = {
    "offered": 3,
    "admitted": 3,
    "served": 3,
    "backlog": 3,
    "dropped_shed": 3,
    "dropped_aged": 3,
    "refused_block": 3,
    "utilization": 4,
    "p50_ms": 1,
    "p99_ms": 1,
    "ttft_ms": 1,
    "tokens_per_s": 1,
    "error_budget_left": 4,
}
TICK_FIELDS = ("node", "tick", *TICK_DECIMALS)


def served_for(
    gpu: str,
    quant: str,
    context: int,
    model: str | None = None,
    params_b: float | None = None,
    runtime: str | None = None,
    kv_dtype: str = "auto",
    cat: Catalog | None = None,
) -> Served:
    """A config named by catalog ids as the serving model sees it (the catalog loads late)."""
    from backpressure.catalog.loader import load_catalog
    from backpressure.engine.serving.spec import scheduler, step_cost
    from backpressure.generator.resolve import configure

    cfg = configure(cat or load_catalog(), gpu, quant, context, model, params_b, runtime, kv_dtype)
    cap = cfg.capacity()
    cost = step_cost(cfg.device, cfg.runtime, cfg.fmt, cfg.constants, cfg.arch, cap)
    return Served(cap, scheduler(cfg.runtime, cfg.device, cap), cost)


def default_capacity(**kwargs: Any) -> Served:
    """The serving model's view of a config via the bundled catalog."""
    return served_for(**kwargs)


def build_spec(
    loaded: LoadedScenario,
    rps: float | None = None,
    duration_s: float | None = None,
    capacity: Capacity = default_capacity,
) -> SimSpec:
    """Turn a validated scenario into the engine's plain numbers."""
    sc = loaded.scenario
    src = sc.load
    source = SourceSpec(
        shape=Shape(src.shape),
        rps=rps if rps is not None else src.level_rps,
        arrivals=Arrivals(src.arrivals),
        start_fraction=src.start_fraction,
        ramp_s=src.ramp_s,
        base_fraction=src.base_fraction,
        at_s=src.at_s,
        until_s=src.until_s,
        burst_bias=src.burst_bias,
    )
    problems: list[Problem] = []
    nodes = []
    for entry, part in loaded.nodes:
        llm = None
        if isinstance(part, LlmPart):
            llm = _llm(loaded, entry.name, part, capacity, problems)
            if llm is None:
                continue
        nodes.append(node_spec(entry.name, entry.after, part, llm))
    if problems:
        raise CatalogError(problems)
    rules = Rules(
        p99_slo_ms=sc.slo.p99_ms,
        ttft_budget_ms=sc.slo.ttft_ms,
        availability=sc.slo.availability,
        soak_utilization=sc.slo.soak_utilization,
        soak_s=sc.slo.soak_s,
        window_s=sc.slo.window_s,
    )
    return SimSpec(sc.id, source, tuple(nodes), rules, duration_s or sc.duration_s)


def node_spec(name: str, after: str, part: Part, llm: LlmSpec | None) -> NodeSpec:
    """One engine node from a part with the node's overrides applied."""
    if isinstance(part, AppPart):
        servers, service, cap, word = part.workers, part.service_time_s, None, "workers"
    elif isinstance(part, DatabasePart):
        servers, service, cap, word = part.pool_size, part.query_time_s, None, "pool"
    elif isinstance(part, QueuePart):
        servers, service, cap, word = 1, part.service_time_s, part.throughput_rps, "queue"
    else:
        assert llm is not None
        servers, service, cap, word = llm.slots, 0.0, 0.0, "slots"
    return NodeSpec(
        name=name,
        parent=after,
        kind=NodeKind.LLM if llm is not None else NodeKind.SERVER,
        discipline=Discipline(part.discipline),
        servers=servers,
        service_s=service,
        capacity_rps=cap if cap is not None else servers / service,
        max_depth=float(part.max_depth or 0),
        max_age_s=part.max_age_s,
        lifo=part.lifo,
        lifo_after_s=part.lifo_after_s,
        resource=word,
        llm=llm,
    )


def _llm(
    loaded: LoadedScenario, name: str, part: LlmPart, capacity: Capacity, problems: list[Problem]
) -> LlmSpec | None:
    profile = {"prompt_tokens": part.prompt_tokens, "output_tokens": part.output_tokens}
    if part.explicit:
        return LlmSpec.explicit(
            slots=part.slots or 0,
            prefill_tokens_per_s=part.prefill_tokens_per_s or 0.0,
            step_fixed_s=part.step_fixed_s or 0.0,
            step_per_kv_token_s=part.step_per_kv_token_s or 0.0,
            step_compute_per_seq_s=part.step_compute_per_seq_s or 0.0,
            **profile,
        )
    try:
        served = capacity(
            gpu=part.gpu,
            model=part.model,
            params_b=part.params_b,
            quant=part.quant,
            context=part.context,
            runtime=part.runtime,
            kv_dtype=part.kv_dtype,
        )
    except (KeyError, ValueError, CatalogError) as exc:
        problems.append(Problem(str(loaded.path), name, "gpu", f"cannot resolve capacity: {exc}"))
        return None
    llm, why = from_served(served, **profile)
    if llm is None:
        problems.append(Problem(str(loaded.path), name, "context" if "fit" in why else "gpu", why))
    return llm


def from_served(
    served: Served, prompt_tokens: int, output_tokens: int
) -> tuple[LlmSpec | None, str]:
    """The engine's LLM node from the serving model's view of a config, or why there is none.

    The node's slots are the requests of this profile the runtime's scheduler
    holds at once (:func:`requests_held`: vLLM admits by the blocks a request
    holds, llama.cpp by its fixed slots); its service comes from the step cost.
    """
    cap, sched = served.capacity, served.scheduler
    if not cap.fits or cap.slots < 1:
        return None, "the model does not fit: no slots at this context"
    if served.cost is None:
        return None, "no bandwidth or FLOPS figure for this device: no step cost"
    # a hybrid pool holds requests of this profile by what its layer groups keep
    blocks = pool_blocks(cap, sched.kv_blocks, prompt_tokens + output_tokens - 1)
    held = requests_held(replace(sched, kv_blocks=blocks), prompt_tokens, output_tokens)
    if held < 1:
        return None, "the model does not fit: no room for one request of this profile"
    spec = LlmSpec(
        slots=held,
        cost=served.cost,
        max_batched_tokens=sched.max_batched_tokens,
        ubatch_tokens=sched.ubatch_tokens,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
    )
    return spec, ""


def run(spec: SimSpec, seed: int) -> SimResult:
    """One run at the source's level."""
    return simulate(spec, [spec.source.rps], mulberry32(seed))


def run_sweep(spec: SimSpec, levels: list[float], seed: int) -> SweepReport:
    """Every level in one engine call."""
    return sweep(spec, levels, mulberry32(seed))


def _num(value: float, places: int) -> str:
    text = f"{value:.{places}f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def _cells(row: TickRow) -> list[str]:
    return [
        row.node,
        str(row.tick),
        *(_num(getattr(row, name), places) for name, places in TICK_DECIMALS.items()),
    ]


def tick_lines(result: SimResult, seed: int, fmt: str) -> Iterator[str]:
    """The tick file, line by line: a parameter header, then CSV or JSON lines."""
    spec = result.spec
    yield (
        f"# scenario {spec.name}; seed {seed}; rps {fmt_rps(spec.source.rps)}; "
        f"duration {spec.duration_s:g} s; tick {TICK_S * 1000:g} ms"
    )
    if fmt == "csv":
        yield ",".join(TICK_FIELDS)
    for row in tick_rows(result):
        cells = _cells(row)
        if fmt == "csv":
            yield ",".join(cells)
        else:
            body = ", ".join(f'"{k}": {v}' for k, v in zip(TICK_FIELDS[2:], cells[2:], strict=True))
            yield f'{{"node": "{row.node}", "tick": {row.tick}, {body}}}'


def write_ticks(result: SimResult, seed: int, path: Path) -> None:
    """Write the tick file; JSON lines for ``.jsonl``/``.json``, CSV otherwise."""
    fmt = "jsonl" if path.suffix in (".jsonl", ".json") else "csv"
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for line in tick_lines(result, seed, fmt):
            out.write(line + "\n")


def _r(value: float | None, places: int = 3) -> float | None:
    return None if value is None else round(value, places) + 0.0


def report_json(rep: RunReport) -> dict[str, Any]:
    """One run's verdict as plain data (rounded)."""
    return {
        "rps": _r(rep.rps),
        "passed": rep.passed,
        "failing_rule": rep.failing_rule,
        "failing_node": rep.failing_node,
        "fail_s": _r(rep.fail_s, 1),
        "bottleneck": rep.bottleneck,
        "worst_p99_ms": _r(rep.worst_p99_ms, 1),
        "worst_ttft_ms": _r(rep.worst_ttft_ms, 1),
        "error_budget_left": _r(rep.error_budget_left, 4),
    }


def run_json(result: SimResult, seed: int) -> str:
    """A run as canonical JSON: verdict plus per-node summaries."""
    rep = result.reports[0]
    nodes = {
        s.node: {
            "mean_utilization": _r(s.mean_utilization, 4),
            "peak_utilization": _r(s.peak_utilization, 4),
            "max_backlog": _r(s.max_backlog),
            "worst_p99_ms": _r(s.worst_p99_ms, 1),
            "worst_ttft_ms": _r(s.worst_ttft_ms, 1),
            "offered": _r(s.offered),
            "served": _r(s.served),
            "dropped_shed": _r(s.dropped_shed),
            "dropped_aged": _r(s.dropped_aged),
            "refused_block": _r(s.refused_block),
            "error_budget_left": _r(s.error_budget_left, 4),
        }
        for s in rep.nodes
    }
    doc = {
        "scenario": result.spec.name,
        "seed": seed,
        "duration_s": result.spec.duration_s,
        "tick_s": TICK_S,
        **report_json(rep),
        "nodes": nodes,
    }
    return json.dumps(doc, sort_keys=True, indent=2)


def sweep_json(report: SweepReport, spec: SimSpec, seed: int) -> str:
    """A sweep as canonical JSON: the breaking point first, then every level."""
    doc = {
        "scenario": spec.name,
        "seed": seed,
        "duration_s": spec.duration_s,
        "breaking_rps": _r(report.breaking_rps),
        "bottleneck": report.bottleneck,
        "failing_node": report.failing_node,
        "failing_rule": report.failing_rule,
        "points": [report_json(p) for p in report.points],
    }
    return json.dumps(doc, sort_keys=True, indent=2)


def bar(share: float, width: int = 20) -> str:
    """A text health bar: ``[########------------]``."""
    full = min(width, max(0, round(share * width)))
    return "[" + "#" * full + "-" * (width - full) + "]"


def human_run(result: SimResult, seed: int) -> list[str]:
    """Per-node health as text bars, then the verdict line."""
    spec, rep = result.spec, result.reports[0]
    lines = [
        f"{spec.name}: {fmt_rps(rep.rps)} rps for {spec.duration_s:g} s, seed {seed} "
        f"({spec.ticks:,} ticks of {TICK_S * 1000:g} ms)",
        f"{'node':<12} {'utilization':<27} {'queue':>9} {'p99':>9} {'TTFT':>9}  error budget",
    ]
    for s in rep.nodes:
        ttft = fmt_ms(s.worst_ttft_ms) if s.worst_ttft_ms > 0 else "-"
        lines.append(
            f"{s.node:<12} {bar(s.mean_utilization)} {s.mean_utilization * 100:>4.0f} % "
            f"{s.max_backlog:>9,.0f} {fmt_ms(s.worst_p99_ms):>9} {ttft:>9}  "
            f"{bar(max(0.0, s.error_budget_left))} {max(0.0, s.error_budget_left) * 100:.0f} %"
        )
    verdict = "PASS" if rep.passed else f"FAIL ({rep.failing_rule} at {rep.fail_s:g} s)"
    lines.append(f"{verdict}: {rep.bottleneck}")
    return lines


def human_sweep(report: SweepReport, spec: SimSpec) -> list[str]:
    """One line per level, then the breaking point."""
    lines = [f"{spec.name}: sweep of {len(report.points)} levels, {spec.duration_s:g} s each"]
    for p in report.points:
        mark = "pass" if p.passed else f"FAIL {p.failing_rule}"
        lines.append(f"{fmt_rps(p.rps):>9} rps  {mark:<17} {p.bottleneck}")
    if report.breaking_rps is None:
        lines.append(f"holds at every level: {report.bottleneck}")
    else:
        lines.append(f"breaks at {fmt_rps(report.breaking_rps)} rps: {report.bottleneck}")
    return lines
