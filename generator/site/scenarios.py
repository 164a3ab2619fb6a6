"""Scenario pages: each catalog scenario run once, per-node health over time."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backpressure.catalog.scenario import PARTS_DIR
from backpressure.engine.sim.model import TICK_S
from backpressure.generator.keys import SCENARIO_MODULE, code_digest, digest, files_digest
from backpressure.generator.site import gate
from backpressure.generator.site.chart_pack import pack
from backpressure.generator.site.svg import sketch

if TYPE_CHECKING:
    from backpressure.catalog.loader import Catalog
    from backpressure.catalog.scenario import LoadedScenario
    from backpressure.generator.simulate import Capacity
    from backpressure.generator.site.publish.cache import RenderCache

HEALTH = (
    ("utilization", "utilization"),
    ("backlog", "queue depth"),
    ("p99_ms", "p99 [ms]"),
    ("error_budget_left", "error budget left"),
)


MAX_POINTS = 300


def _per_second(rows: list[Any]) -> list[dict[str, Any]]:
    """Tick rows folded to at most 300 points per node and metric (the worst tick of each)."""
    ticks = max((r.tick for r in rows), default=0) + 1
    per = max(round(1 / TICK_S), -(-ticks // MAX_POINTS))
    worst: dict[tuple[str, int, str], float] = {}
    for r in rows:
        second = r.tick // per
        for field, label in HEALTH:
            key = (r.node, second, label)
            value = float(getattr(r, field))
            if field == "error_budget_left":
                worst[key] = min(worst.get(key, value), value)
            else:
                worst[key] = max(worst.get(key, value), value)
    return [
        {
            "node": node,
            "t": float(f"{second * per * TICK_S:.4g}"),
            "metric": label,
            "value": float(f"{v:.4g}"),
        }
        for (node, second, label), v in worst.items()
    ]


def _sim_version(parts: Path) -> str:
    """Hash of the code a scenario run passes through and of the part files it is wired from.

    The code is derived from this module's imports.
    """
    return digest(code_digest(SCENARIO_MODULE), files_digest(sorted(parts.glob("*.yaml")), parts))


def scenario_contexts(
    folder: Path, cache: RenderCache | None = None, cat: Catalog | None = None
) -> list[dict[str, Any]]:
    """One page context per scenario file in ``folder``; empty if there is none.

    Parts and LLM capacity come from ``cat`` (its ``parts/`` folder and its
    GPUs and models), by default the bundled catalog. A run costs about a
    second, so with a cache each context is kept under a key of the scenario
    file, its resolved engine spec (every number the catalog feeds it) and the
    code: an edit elsewhere in the catalog does not rerun it.
    """
    from backpressure.catalog.scenario import load_parts, load_scenario
    from backpressure.generator.simulate import build_spec, default_capacity, served_for

    parts = None
    capacity: Capacity = default_capacity
    if cat is not None:
        parts = load_parts(cat.root / "parts") if (cat.root / "parts").is_dir() else None
        capacity = functools.partial(served_for, cat=cat)
    out = []
    version = _sim_version(cat.root / "parts" if cat is not None else PARTS_DIR) if cache else ""
    for path in sorted(folder.glob("*.yaml")):
        loaded = load_scenario(path, parts)
        if cache is None:
            out.append(_context(loaded, capacity))
            continue
        spec = build_spec(loaded, capacity=capacity)
        key = digest(version, files_digest([path], folder), repr(spec))
        ctx = cache.doc("scenario", key)
        if ctx is None:
            ctx = _context(loaded, capacity)
            cache.put_doc("scenario", key, ctx)
        out.append(ctx)
    return out


def _context(loaded: LoadedScenario, capacity: Capacity) -> dict[str, Any]:
    """Run one scenario: its load sweep, then the run at the breaking rate."""
    from backpressure.engine.sim.run import tick_rows
    from backpressure.generator.simulate import build_spec, human_run, run, run_sweep

    sc = loaded.scenario
    levels = [sc.sweep.start_rps + i * sc.sweep.step_rps for i in range(sc.sweep.points)]
    swept = run_sweep(build_spec(loaded, capacity=capacity), levels, sc.seed)
    # The timeline is the run at the breaking rate: the moment worth seeing.
    at = swept.breaking_rps or sc.load.level_rps
    result = run(build_spec(loaded, rps=at, capacity=capacity), sc.seed)
    health = _per_second(tick_rows(result))
    gate.check_data(
        f"scenario {sc.id}: chart data", {"breaking_rps": swept.breaking_rps, "health": health}
    )
    return {
        "breaking_rps": swept.breaking_rps,
        "bottleneck": swept.bottleneck,
        "failing": f"{swept.failing_node} ({swept.failing_rule})" if swept.failing_node else "",
        "levels": f"{levels[0]:,g} to {levels[-1]:,g} rps, step {sc.sweep.step_rps:,g}",
        "duration": sc.duration_s,
        "id": sc.id,
        "name": sc.name,
        "description": sc.description or "",
        "report": human_run(result, sc.seed),
        "chart_data": pack({"health": {"health": health}}),
        "fallback": sketch(
            [h for h in health if h["metric"] == "utilization"],
            "node",
            "t",
            "value",
            False,
            False,
            "utilization per node over time",
        ),
        "root": "../../",
    }
