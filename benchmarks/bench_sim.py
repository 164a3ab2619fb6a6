"""Speed of the tick simulation: ticks per second and 40-point sweep time (medians).

    python3 benchmarks/bench_sim.py            # from the repo root

A 5-node graph (load -> app -> postgres, app -> queue -> LLM that blocks) runs
10 simulated minutes at 100 ms ticks, at a healthy level and at an overloaded
one, then as a 40-point sweep in one array call; app-postgres likewise. CPU
time (time.process_time), median of several repeats. Timing lives here, never
in the tests.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from catalog.scenario import SCENARIOS_DIR, load_scenario
from engine.queueing import Discipline
from engine.rng import mulberry32
from engine.sim import simulate
from engine.sim_model import LlmSpec, NodeKind, NodeSpec, Rules, SimSpec
from engine.traffic import SourceSpec
from generator.simulate import build_spec

REPEATS = 5


def five_nodes(duration_s: float = 600.0) -> SimSpec:
    """load -> app -> postgres, app -> queue -> llm (block), hand-made numbers."""
    llm = LlmSpec(slots=18, prefill_tokens_per_s=5000.0, step_fixed_s=0.008,
                  step_per_kv_token_s=1e-7, step_compute_per_seq_s=0.0004,
                  prompt_tokens=512, output_tokens=256)
    nodes = (
        NodeSpec("app", "load", servers=16, service_s=0.005, capacity_rps=3200.0),
        NodeSpec("postgres", "app", discipline=Discipline.BUFFER, servers=20, service_s=0.012,
                 capacity_rps=20 / 0.012, max_depth=2000, max_age_s=30, resource="pool"),
        NodeSpec("queue", "app", discipline=Discipline.BUFFER, service_s=0.001,
                 capacity_rps=5000.0, max_depth=10_000, max_age_s=30, lifo=False,
                 resource="queue"),
        NodeSpec("llm", "queue", kind=NodeKind.LLM, discipline=Discipline.BLOCK, servers=18,
                 service_s=0.0, capacity_rps=0.0, resource="slots", llm=llm),
    )
    # every request reaches the LLM here, so the load is in LLM terms
    return SimSpec("bench-5", SourceSpec(rps=5.0), nodes, Rules(p99_slo_ms=500.0), duration_s)


def median_cpu(fn: object, repeats: int = REPEATS) -> float:
    """Median CPU seconds of ``fn()``."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()  # type: ignore[operator]
        times.append(time.process_time() - start)
    return statistics.median(times)


def report(label: str, spec: SimSpec, levels: list[float]) -> None:
    ticks = spec.ticks * len(levels)
    cpu = median_cpu(lambda: simulate(spec, levels, mulberry32(1)))
    print(f"{label:<46} {cpu * 1000:8.1f} ms  {ticks / cpu:12,.0f} ticks/s "
          f"({len(spec.nodes) + 1} nodes, {len(levels)} level(s) x {spec.ticks:,} ticks)")


def main() -> None:
    five = five_nodes()
    report("5-node, 10 min, healthy (5 rps)", five, [5.0])
    report("5-node, 10 min, overloaded (12 rps)", five, [12.0])
    report("5-node, 10 min, 40-point sweep (0.5..20 rps)", five, [0.5 * i for i in range(1, 41)])
    loaded = load_scenario(SCENARIOS_DIR / "app-postgres.yaml")
    ap = build_spec(loaded)
    report("app-postgres, 10 min, 1,000 rps", ap, [1000.0])
    report("app-postgres, 10 min, 1,500 rps (breaks)", ap, [1500.0])
    report("app-postgres, 10 min, 2,000 rps (saturated)", ap, [2000.0])
    report("app-postgres, 10 min, 40-point sweep", ap, loaded.scenario.sweep.levels())


if __name__ == "__main__":
    main()
