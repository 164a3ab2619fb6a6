"""Scenario pages: each catalog scenario run once, per-node health over time."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.sim_model import TICK_S
from generator.chart_pack import pack
from generator.site_keys import ROOT, digest, files_digest
from generator.site_svg import sketch

if TYPE_CHECKING:
    from catalog.loader import Catalog
    from catalog.scenario import LoadedScenario
    from generator.simulate import Capacity
    from generator.site_cache import RenderCache

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


# The generator modules a scenario run passes through (besides engine/ and catalog/).
SIM_MODULES = ("simulate", "resolve", "site_scenarios", "site_svg")


def _sim_version() -> str:
    """Hash of the code and part files a scenario run passes through."""
    files = [
        *ROOT.glob("engine/**/*.py"),
        *ROOT.glob("catalog/**/*.py"),
        *ROOT.glob("catalog/parts/*.yaml"),
        *(ROOT / "generator" / f"{name}.py" for name in SIM_MODULES),
    ]
    return files_digest(files)


def scenario_contexts(folder: Path, cache: RenderCache | None = None,
                      cat: Catalog | None = None) -> list[dict[str, Any]]:
    """One page context per scenario file in ``folder``; empty if there is none.

    Parts and LLM capacity come from ``cat`` (its ``parts/`` folder and its
    GPUs and models), by default the bundled catalog. A run costs about a
    second, so with a cache each context is kept under a key of the scenario
    file, its resolved engine spec (every number the catalog feeds it) and the
    code: an edit elsewhere in the catalog does not rerun it.
    """
    from catalog.scenario import load_parts, load_scenario
    from generator.resolve import capacity_for
    from generator.simulate import build_spec, default_capacity

    parts = None
    capacity: Capacity = default_capacity
    if cat is not None:
        parts = load_parts(cat.root / "parts") if (cat.root / "parts").is_dir() else None
        capacity = functools.partial(capacity_for, cat=cat)
    out = []
    version = _sim_version() if cache else ""
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
    from engine.sim import tick_rows
    from generator.simulate import build_spec, human_run, run, run_sweep

    sc = loaded.scenario
    levels = [sc.sweep.start_rps + i * sc.sweep.step_rps for i in range(sc.sweep.points)]
    swept = run_sweep(build_spec(loaded, capacity=capacity), levels, sc.seed)
    # The timeline is the run at the breaking rate: the moment worth seeing.
    at = swept.breaking_rps or sc.load.level_rps
    result = run(build_spec(loaded, rps=at, capacity=capacity), sc.seed)
    health = _per_second(tick_rows(result))
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
