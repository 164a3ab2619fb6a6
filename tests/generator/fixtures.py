"""Sweep-shaped fixture data for the site, computed by the engine itself.

A handful of configs (fits and does-not-fit, vLLM and llama.cpp, a rig, unified
memory, a CPU host, an MoE model, a 4k/8k pair for "nearest fit") evaluated the
way the sweep evaluates them, so pages and charts are tested on real rows.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from pathlib import Path

from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.generator import manifest, resolve
from backpressure.generator.keys import InputKeys
from backpressure.generator.records import Curves, ResultRow
from backpressure.generator.results_io import CURVES, RESULTS, curves_jsonl, results_csv
from backpressure.generator.sweep.combos import Combo
from backpressure.generator.sweep.evaluate import evaluate_many

COMBOS: tuple[tuple[str, str, str, int], ...] = (
    ("rtx-4090", "llama-3.1-8b", "q4_k_m", 8192),
    ("rtx-4090", "llama-3.1-8b", "q4_k_m", 32768),
    ("rtx-4090", "llama-3.1-8b", "q8_0", 8192),
    ("rtx-4090", "llama-3.1-8b", "f16", 131072),
    ("rtx-4090", "llama-3.3-70b", "q4_k_m", 8192),
    ("rtx-4090", "llama-3.3-70b", "q2_k", 8192),
    ("2x-rtx-4090", "llama-3.3-70b", "q4_k_m", 8192),
    ("h100-sxm", "llama-3.1-8b", "fp8", 8192),
    ("h100-sxm", "mixtral-8x7b", "fp8", 32768),
    ("m2-ultra-192gb", "mixtral-8x7b", "q4_k_m", 8192),
    ("epyc-9654-768gb", "llama-3.1-8b", "q4_k_m", 4096),
)


def _combo(cat: Catalog, device: str, model: str, quant: str, context: int) -> Combo:
    kind = resolve.device_for(cat, device).memory_kind
    runtime = resolve.default_runtime(cat, cat.quants[quant], kind)
    return Combo(device, model, quant, runtime, context, "auto")


@functools.cache
def _evaluated(
    combos: tuple[tuple[str, str, str, int], ...], root: Path | None
) -> tuple[tuple[ResultRow, Curves], ...]:
    cat = load_catalog(root)
    keys = InputKeys(cat)
    todo = [(c, keys.fingerprint_key(c)) for c in (_combo(cat, *x) for x in combos)]
    return tuple(evaluate_many(cat, todo))


def evaluated(
    combos: Iterable[tuple[str, str, str, int]] = COMBOS, cat: Catalog | None = None
) -> list[tuple[ResultRow, Curves]]:
    """Rows and curves of ``combos``, as the sweep computes them (cached per process)."""
    root = cat.root if cat is not None and cat.root != load_catalog().root else None
    return list(_evaluated(tuple(combos), root))


def make_rows(
    combos: Iterable[tuple[str, str, str, int]] = COMBOS, cat: Catalog | None = None
) -> list[ResultRow]:
    """Result rows for ``combos`` (device, model, quant, context)."""
    return [row for row, _ in evaluated(combos, cat)]


def write_fixture(
    out_dir: Path, combos: Iterable[tuple[str, str, str, int]] = COMBOS, cat: Catalog | None = None
) -> list[ResultRow]:
    """Write ``results.csv`` and ``curves.jsonl`` for ``combos`` into ``out_dir``."""
    pairs = evaluated(combos, cat)
    rows = [row for row, _ in pairs]
    write_sweep(out_dir, rows, [c for _, c in pairs])
    return rows


def curves_for(
    combos: Iterable[tuple[str, str, str, int]] = COMBOS, cat: Catalog | None = None
) -> dict[str, Curves]:
    """Curves of ``combos`` by config id."""
    return {c.config_id: c for _, c in evaluated(combos, cat)}


def write_sweep(out_dir: Path, rows: Iterable[ResultRow], curves: Iterable[Curves]) -> None:
    """Write a sweep's tables as the sweep does: one unit, with its manifest."""
    manifest.commit(out_dir, {RESULTS: results_csv(rows), CURVES: curves_jsonl(curves)})


def all_combos(cat: Catalog, limit: int | None = None) -> Iterator[tuple[str, str, str, int]]:
    """Every device x model x servable quant x context, as the full sweep would see it."""
    n = 0
    for device in cat.devices():
        kind = resolve.device_for(cat, device).memory_kind
        for mid, arch in cat.archs.items():
            for qid, q in cat.quants.items():
                rt = resolve.default_runtime(cat, q, kind)
                if kind not in cat.runtimes[rt].memory_kinds:
                    continue
                for ctx in sorted({min(c, arch.max_context) for c in cat.settings.contexts}):
                    if limit is not None and n >= limit:
                        return
                    n += 1
                    yield device, mid, qid, ctx


def _curves(row: ResultRow) -> Curves:
    """The evaluated curves of a fixture row's config, or none for a row made up by a test."""
    known = {c.config_id: c for _, c in _evaluated(COMBOS, None)}
    return known.get(row.config_id) or Curves(row.config_id, *_EMPTY)


_EMPTY = ((), (), (), (), (), (), (), (), (), (), (), (), (), (), None, (), (), (), (), ())
