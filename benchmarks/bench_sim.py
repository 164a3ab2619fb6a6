"""Speed of the tick simulation: ticks per second and 40-point sweep time (medians).

    python3 benchmarks/bench_sim.py            # from the repo root

A 5-node graph (load -> app -> postgres, app -> queue -> LLM that blocks) runs
10 simulated minutes at 100 ms ticks, at a healthy level and at an overloaded
one, then as a 40-point sweep in one array call; app-postgres likewise. Then
the batch sweep's rig (Poisson load -> LLM with a buffering queue), one config
alone and 100 configs of different sizes through engine.sim.run.simulate_many, 40
levels x 3 simulated minutes each. CPU time (time.process_time), median of
several repeats. Timing lives here, never in the tests.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backpressure.catalog.scenario import SCENARIOS_DIR, load_scenario
from backpressure.engine.rng import mulberry32
from backpressure.engine.sim.model import LlmSpec, NodeKind, NodeSpec, Rules, SimSpec, slot_time_s
from backpressure.engine.sim.queueing import Discipline
from backpressure.engine.sim.run import Scratch, simulate, simulate_many
from backpressure.engine.sim.traffic import SourceSpec
from backpressure.generator.simulate import build_spec

REPEATS = 5


def five_nodes(duration_s: float = 600.0) -> SimSpec:
    """load -> app -> postgres, app -> queue -> llm (block), hand-made numbers."""
    llm = LlmSpec.explicit(
        slots=18,
        prefill_tokens_per_s=5000.0,
        step_fixed_s=0.008,
        step_per_kv_token_s=1e-7,
        step_compute_per_seq_s=0.0004,
        prompt_tokens=512,
        output_tokens=256,
    )
    nodes = (
        NodeSpec("app", "load", servers=16, service_s=0.005, capacity_rps=3200.0),
        NodeSpec(
            "postgres",
            "app",
            discipline=Discipline.BUFFER,
            servers=20,
            service_s=0.012,
            capacity_rps=20 / 0.012,
            max_depth=2000,
            max_age_s=30,
            resource="pool",
        ),
        NodeSpec(
            "queue",
            "app",
            discipline=Discipline.BUFFER,
            service_s=0.001,
            capacity_rps=5000.0,
            max_depth=10_000,
            max_age_s=30,
            lifo=False,
            resource="queue",
        ),
        NodeSpec(
            "llm",
            "queue",
            kind=NodeKind.LLM,
            discipline=Discipline.BLOCK,
            servers=18,
            service_s=0.0,
            capacity_rps=0.0,
            resource="slots",
            llm=llm,
        ),
    )
    # every request reaches the LLM here, so the load is in LLM terms
    return SimSpec("bench-5", SourceSpec(rps=5.0), nodes, Rules(p99_slo_ms=500.0), duration_s)


def llm_rig(slots: int, scale: float) -> tuple[SimSpec, list[float]]:
    """The batch sweep's rig for an LLM with ``slots`` slots, and its 40 load levels."""
    llm = LlmSpec.explicit(
        slots=slots,
        prefill_tokens_per_s=5000.0 * scale,
        step_fixed_s=0.008 / scale,
        step_per_kv_token_s=1e-7 / scale,
        step_compute_per_seq_s=0.000403 / scale,
        prompt_tokens=1024,
        output_tokens=128,
    )
    node = NodeSpec(
        "llm",
        "load",
        kind=NodeKind.LLM,
        discipline=Discipline.BUFFER,
        servers=slots,
        service_s=0.0,
        capacity_rps=0.0,
        max_depth=8.0 * slots,
        max_age_s=60.0,
        resource="slots",
        llm=llm,
    )
    rules = Rules(p99_slo_ms=4000.0, soak_utilization=0.85, soak_s=120.0)
    spec = SimSpec("rig", SourceSpec(), (node,), rules, 180.0)
    saturation = slots / float(slot_time_s(llm, np.array([float(slots)]))[0])
    return spec, [saturation * f for f in np.geomspace(0.1, 3.0, 40)]


def report_batch(configs: int) -> None:
    rigs = [llm_rig(slots, scale) for slots in (4, 18, 64, 256) for scale in (0.5, 1.0, 2.0)]
    runs = [(*rigs[i % len(rigs)], i) for i in range(configs)]
    scratch = Scratch()

    def batch() -> None:
        for _ in simulate_many(
            [(s, lv, mulberry32(seed)) for s, lv, seed in runs], scratch=scratch
        ):
            pass

    cpu = median_cpu(batch, repeats=3)
    print(
        f"LLM rig, {configs} configs x 40 levels x 3 min (simulate_many) {cpu * 1000:8.1f} ms "
        f"{1000 * cpu / configs:8.2f} ms/config"
    )


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
    print(
        f"{label:<46} {cpu * 1000:8.1f} ms  {ticks / cpu:12,.0f} ticks/s "
        f"({len(spec.nodes) + 1} nodes, {len(levels)} level(s) x {spec.ticks:,} ticks)"
    )


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
    rig, levels = llm_rig(18, 1.0)
    report("LLM rig, 3 min, 40 levels, one config", rig, levels)
    report_batch(100)


if __name__ == "__main__":
    main()
