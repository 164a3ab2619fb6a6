"""Frozen reference outputs that guard against a quiet recalibration.

``goldens/configs.txt`` lists about fifty representative config ids (consumer,
datacenter, Apple, CPU; dense, MoE, MLA; barely fits and roomy);
``goldens/configs.csv`` holds their full results rows, and
``goldens/worked_example.txt`` the worked example's report, and
``goldens/<scenario>.sweep.json`` / ``.ticks.csv`` the frozen simulation runs
(:data:`SIM_RUNS`). Checking recomputes
all of them and compares byte for byte; ``--update`` rewrites them, and the
commit that does so must say why the old numbers were wrong.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.estimate import AdHocDevice, EstimateArgs, run_estimate
from backpressure.generator.keys import InputKeys
from backpressure.generator.paths import GOLDENS
from backpressure.generator.report_text import render
from backpressure.generator.results_io import results_csv
from backpressure.generator.sweep.combos import enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate

CASES = "configs.txt"

WORKED_EXAMPLE = EstimateArgs(
    gpu=None,
    adhoc=AdHocDevice(24, None, None, "discrete"),
    model=None,
    model_config=None,
    params_b=7,
    quant="q4_k_m",
    context=8192,
    gpus=1,
    runtime=None,
    gpu_memory_utilization=None,
    kv_dtype="auto",
    overhead_gb=2,
)


def case_ids(root: Path = GOLDENS) -> list[str]:
    """Config ids of the golden table, comments and blanks skipped."""
    lines = (root / CASES).read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def configs_csv(cat: Catalog, ids: list[str]) -> str:
    """The golden table recomputed from the catalog."""
    keys = InputKeys(cat)
    combos = {c.id: c for c in enumerate_combos(cat)}
    missing = [i for i in ids if i not in combos]
    if missing:
        raise KeyError(f"golden config ids not in the sweep: {', '.join(missing)}")
    return results_csv(evaluate(cat, combos[i], keys.fingerprint_key(combos[i]))[0] for i in ids)


def worked_example_txt(cat: Catalog) -> str:
    """SPEC §2's worked example as ``backpressure estimate`` prints it."""
    return render(run_estimate(cat, WORKED_EXAMPLE)) + "\n"


# The frozen simulation runs: each scenario's sweep, and one run's tick file at
# (seed, rps, duration) (tests/generator/ci/test_goldens_sim.py).
SIM_RUNS = {"app-postgres": (1, 1500.0, 60.0), "llm-7b-q4-24gb": (1, 10.0, 60.0)}


def sim_sweep_json(cat: Catalog, scenario: str) -> str:
    """A scenario's sweep as ``backpressure simulate --sweep --json`` prints it."""
    from backpressure.generator import simulate as sim

    loaded = _scenario(cat, scenario)
    spec = sim.build_spec(loaded, capacity=_capacity(cat))
    sc = loaded.scenario
    return sim.sweep_json(sim.run_sweep(spec, sc.sweep.levels(), sc.seed), spec, sc.seed) + "\n"


def sim_ticks_csv(cat: Catalog, scenario: str) -> str:
    """One run's tick file as ``backpressure simulate --ticks`` writes it."""
    from backpressure.generator import simulate as sim

    seed, rps, duration = SIM_RUNS[scenario]
    spec = sim.build_spec(
        _scenario(cat, scenario), rps=rps, duration_s=duration, capacity=_capacity(cat)
    )
    return "".join(line + "\n" for line in sim.tick_lines(sim.run(spec, seed), seed, "csv"))


def _scenario(cat: Catalog, scenario: str) -> Any:
    from backpressure.catalog.scenario import load_parts, load_scenario

    return load_scenario(
        cat.root / "scenarios" / f"{scenario}.yaml", load_parts(cat.root / "parts")
    )


def _capacity(cat: Catalog) -> Any:
    from backpressure.generator.simulate import served_for

    return functools.partial(served_for, cat=cat)


TABLES = ("configs.csv", "worked_example.txt")  # the capacity goldens, without the simulation
GENERATORS: dict[str, Callable[[Catalog, Path], str]] = {
    "configs.csv": lambda cat, root: configs_csv(cat, case_ids(root)),
    "worked_example.txt": lambda cat, root: worked_example_txt(cat),
    **{
        f"{name}.sweep.json": functools.partial(lambda cat, root, n: sim_sweep_json(cat, n), n=name)
        for name in SIM_RUNS
    },
    **{
        f"{name}.ticks.csv": functools.partial(lambda cat, root, n: sim_ticks_csv(cat, n), n=name)
        for name in SIM_RUNS
    },
}


@dataclass(frozen=True, slots=True)
class GoldenDiff:
    """One golden file whose recomputed text differs from the frozen one."""

    name: str
    diff: str


def check(
    cat: Catalog, root: Path = GOLDENS, names: Iterable[str] | None = None
) -> list[GoldenDiff]:
    """Recompute every golden (or those ``names``); return the ones that differ, with a diff."""
    out = []
    for name, make in _chosen(names):
        fresh = make(cat, root)
        path = root / name
        frozen = path.read_text(encoding="utf-8") if path.exists() else ""
        if fresh != frozen:
            diff = "".join(
                difflib.unified_diff(
                    frozen.splitlines(keepends=True),
                    fresh.splitlines(keepends=True),
                    f"goldens/{name} (frozen)",
                    f"goldens/{name} (recomputed)",
                )
            )
            out.append(GoldenDiff(name, diff))
    return out


def update(cat: Catalog, root: Path = GOLDENS, names: Iterable[str] | None = None) -> list[str]:
    """Rewrite every golden (or those ``names``); return the names that changed."""
    changed = []
    for name, make in _chosen(names):
        fresh = make(cat, root)
        path = root / name
        if not path.exists() or path.read_text(encoding="utf-8") != fresh:
            path.write_text(fresh, encoding="utf-8")
            changed.append(name)
    return changed


def _chosen(names: Iterable[str] | None) -> list[tuple[str, Callable[[Catalog, Path], str]]]:
    if names is None:
        return list(GENERATORS.items())
    return [(name, GENERATORS[name]) for name in names]
