"""Frozen reference outputs that guard against a quiet recalibration.

``goldens/configs.txt`` lists about fifty representative config ids (consumer,
datacenter, Apple, CPU; dense, MoE, MLA; barely fits and roomy);
``goldens/configs.csv`` holds their full results rows, and
``goldens/worked_example.txt`` the worked example's report. Checking recomputes
all of them and compares byte for byte; ``--update`` rewrites them, and the
commit that does so must say why the old numbers were wrong.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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


GENERATORS: dict[str, Callable[[Catalog, Path], str]] = {
    "configs.csv": lambda cat, root: configs_csv(cat, case_ids(root)),
    "worked_example.txt": lambda cat, root: worked_example_txt(cat),
}


@dataclass(frozen=True, slots=True)
class GoldenDiff:
    """One golden file whose recomputed text differs from the frozen one."""

    name: str
    diff: str


def check(cat: Catalog, root: Path = GOLDENS) -> list[GoldenDiff]:
    """Recompute every golden; return the ones that differ, with a unified diff."""
    out = []
    for name, make in GENERATORS.items():
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


def update(cat: Catalog, root: Path = GOLDENS) -> list[str]:
    """Rewrite every golden; return the names that changed."""
    changed = []
    for name, make in GENERATORS.items():
        fresh = make(cat, root)
        path = root / name
        if not path.exists() or path.read_text(encoding="utf-8") != fresh:
            path.write_text(fresh, encoding="utf-8")
            changed.append(name)
    return changed
