"""One config of the sweep: its row and curves, from capacity, then the load sweep.

The code this module imports, directly or not, is what every sweep row depends
on (:data:`backpressure.generator.keys.SWEEP_MODULE`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine.bands import Band
from backpressure.engine.results import CapacityResult
from backpressure.generator import resolve, text
from backpressure.generator.keys import row_fingerprint
from backpressure.generator.records import Curves, ResultRow, permalink
from backpressure.generator.resolve import Config, configure
from backpressure.generator.results_io import curves_head, curves_line
from backpressure.generator.sweep.combos import Combo
from backpressure.generator.sweep.publish import curves_of, serving_band, serving_fields
from backpressure.generator.sweep.rig import (
    LoadSettings,
    Serving,
    build_server,
    serving_key,
    simulate,
)


def _row_dict(row: ResultRow) -> dict[str, Any]:
    return {f: getattr(row, f) for f in row.__dataclass_fields__}


def evaluate(cat: Catalog, combo: Combo, inputs_key: str) -> tuple[ResultRow, Curves]:
    """Cost one combo and find its breaking points."""
    return evaluate_many(cat, [(combo, inputs_key)])[0]


def evaluate_many(
    cat: Catalog, todo: Sequence[tuple[Combo, str]], memo: dict[str, Serving] | None = None
) -> list[tuple[ResultRow, Curves]]:
    """Cost combos and simulate their servers; entry ``i`` equals ``evaluate(cat, *todo[i])``.

    ``memo`` keeps simulations by content key (:func:`serving_key`), so configs
    whose servers are the same (a vLLM config at several contexts) are simulated
    once; it changes no result.
    """
    return [(row, curves_of(combo.id, s)) for combo, row, s in _evaluated(cat, todo, memo)]


def evaluate_lines(
    cat: Catalog, todo: Sequence[tuple[Combo, str]], memo: dict[str, Serving] | None = None
) -> list[tuple[ResultRow, str]]:
    """:func:`evaluate_many` with each config's curves as its ``curves.jsonl`` line.

    Configs that share a simulation (or have none) have the same curves but for
    the config id, which the line holds first (sorted keys): the rest of the line
    is built once per simulation, not once per config.
    """
    tails: dict[int, tuple[Serving | None, str]] = {}
    out = []
    for combo, row, s in _evaluated(cat, todo, memo):
        head = curves_head(combo.id)
        seen = tails.get(id(s))
        if seen is None or seen[0] is not s:
            line = curves_line(curves_of(combo.id, s))
            if not line.startswith(head):  # pragma: no cover - the writer's key order
                raise AssertionError(f"curves line of {combo.id} does not start with its id")
            tails[id(s)] = seen = (s, line[len(head) :])
        out.append((row, head + seen[1]))
    return out


def _evaluated(
    cat: Catalog, todo: Sequence[tuple[Combo, str]], memo: dict[str, Serving] | None
) -> Iterator[tuple[Combo, ResultRow, Serving | None]]:
    """Each combo with its row and its simulation (None where none ran)."""
    settings = LoadSettings.from_catalog(cat)
    memo = {} if memo is None else memo
    # A config's engine inputs differ from its other contexts' only in the context
    # (configure passes it through), so they are resolved once per the rest of the
    # combo; combos arrive sorted, so a batch holds a combo's contexts together.
    bases: dict[tuple[str, str, str, str, str], Config] = {}
    counts: dict[str, int] = {}
    for combo, key in todo:
        base_id = (combo.device, combo.quant, combo.model, combo.runtime, combo.kv_dtype)
        base = bases.get(base_id)
        if base is None:
            base = bases[base_id] = configure(
                cat,
                combo.device,
                combo.quant,
                combo.context,
                combo.model,
                runtime=combo.runtime,
                kv_dtype=combo.kv_dtype,
            )
        cfg = base
        if cfg.context != combo.context:
            cfg = dataclasses.replace(base, context=combo.context)
        cap = cfg.capacity()
        srv = build_server(cfg.device, cfg.runtime, cfg.fmt, cfg.constants, cfg.arch, cap, settings)
        serving = None
        if srv is not None:
            skey = serving_key(srv, settings)
            if skey not in memo:
                memo[skey] = simulate(srv, settings, skey)
            serving = memo[skey]
        band = serving_band(cat, cfg, cap)
        b = serving.breaking if serving is not None else None
        if b is not None and b.rate is not None and b.rule is not None:
            band = resolve.breaking_band(cat, band, b.rule)
        if combo.device not in counts:
            counts[combo.device] = resolve.device_for(cat, combo.device).count
        row = _row(combo, key, counts[combo.device], cap, serving, band, settings)
        yield combo, row, serving


def _row(
    combo: Combo,
    inputs_key: str,
    gpu_count: int,
    cap: CapacityResult,
    serving: Serving | None,
    band: Band,
    s: LoadSettings,
) -> ResultRow:
    shortfall = 0 if cap.fits else cap.kv_bytes_per_request - cap.kv_budget_bytes
    data: dict[str, Any] = dict(
        config_id=combo.id,
        permalink=permalink(combo.device, combo.model, combo.quant, combo.context, combo.kv_dtype),
        gpu=combo.device,
        gpu_count=gpu_count,
        model=combo.model,
        quant=combo.quant,
        runtime=combo.runtime,
        kv_dtype=combo.kv_dtype,
        context=combo.context,
        fits=cap.fits,
        slots=cap.slots,
        shortfall_bytes=shortfall,
        memory_bytes=cap.memory_bytes,
        usable_memory_bytes=cap.usable_memory_bytes,
        weights_bytes=cap.weights_bytes,
        overhead_bytes=cap.overhead_bytes,
        kv_budget_bytes=cap.kv_budget_bytes,
        kv_bytes_per_token=cap.kv_bytes_per_token,
        kv_bytes_per_request=cap.kv_bytes_per_request,
        kv_capacity_tokens=cap.kv_capacity_tokens,
        kv_basis=cap.kv_basis,
        total_params=cap.total_params,
        active_params=cap.active_params,
        decode_tokens_per_s=cap.decode_tokens_per_s,
        prefill_tokens_per_s=cap.prefill_tokens_per_s,
        bandwidth_concurrency=cap.bandwidth_concurrency,
        bandwidth_slow_batches=text.ranges(cap.bandwidth_slow_batches),
        binding_ceiling=cap.binding_ceiling,
        error_band_pct=cap.error_band_pct,
        error_band_reason=cap.error_band_reason,
        **serving_fields(cap, serving, band, s),
    )
    # The fingerprint hashes every other field: built from the same values, once.
    data["fingerprint"] = row_fingerprint(inputs_key, data)
    return ResultRow(**data)


def fingerprint(inputs_key: str, row: ResultRow) -> str:
    """Hash of inputs, engine version and every published output of a row."""
    return row_fingerprint(
        inputs_key, {k: v for k, v in _row_dict(row).items() if k != "fingerprint"}
    )
