"""Compile every numba kernel once, before processes that use them start in parallel.

The kernels are compiled with ``cache=True`` (engine/sim/jit.py): the machine
code is written beside each module and later processes load it. On a fresh
checkout, processes started at once (the test workers, a build's sweep
workers) would each compile the same kernels at the same time, minutes of two
cores; after this they load them. The results are the same either way.

    python -m backpressure.generator.sweep.warm
"""

from __future__ import annotations

from backpressure.catalog.loader import load_catalog
from backpressure.engine.sim.kernel import warm_up as warm_sim
from backpressure.generator.keys import InputKeys
from backpressure.generator.site.scenarios import scenario_contexts
from backpressure.generator.sweep.combos import enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate_many
from backpressure.generator.sweep.rig import warm_up as warm_serving

# One config per runtime's scheduler, dense and MoE, small enough to fit a consumer card.
CONFIGS = (
    "rtx-4090--llama-3.1-8b--q4_k_m--8k",
    "rtx-4090--llama-3.1-8b--awq-int4--8k",
    "rtx-4090--qwen3-30b-a3b--q4_k_m--8k",
)


def warm() -> None:
    """Run the kernels once on the bundled catalog: configs of each runtime, and the scenarios."""
    warm_sim()
    # the serving loop and its summaries as Python calls them (a timeline, a
    # custom run); the sweep's configs run them inside one compiled call
    warm_serving()
    cat = load_catalog()
    keys = InputKeys(cat)
    combos = [c for c in enumerate_combos(cat) if c.id in CONFIGS]
    evaluate_many(cat, [(c, keys.fingerprint_key(c)) for c in combos])
    scenario_contexts(cat.root / "scenarios", None, cat)


if __name__ == "__main__":
    warm()
