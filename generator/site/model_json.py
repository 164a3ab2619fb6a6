"""Each config's object in ``api/models/<model>.json``: rates, costs, why a figure is missing.

The model's JSON index (written by :mod:`backpressure.generator.site.model_api`)
holds one such object per config of the model; the ranking and compare pages
fetch it (relative to themselves), so it carries the fields a table shows and
nothing from a config's curves but the one closed-loop point.

Costs come from :func:`backpressure.generator.plan.economics.economics` (the
catalog's default quote of each device, rental where listed, else owned), per
million output tokens at the breaking rate, with the band carried through
(``usd_per_million_output_tokens_low`` comes from ``breaking_rps_high``).
``tokens_per_s_per_user`` is the decode speed each user sees at the reference
load, the breaking rate: the closed-loop point that carries it
(:func:`backpressure.generator.plan.concurrency.point_at_rate`).

A missing figure is ``null`` and ``status`` says why (``serves``,
``fails-at-any-load``, ``too-slow``, ``does-not-fit``, ``not-simulated``; see
:func:`backpressure.generator.plan.rank.status`); ``unpriced_reason`` says why
a config has no cost. Floats carry six significant digits, never NaN.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
from backpressure.catalog.loader import Catalog
from backpressure.generator.plan.economics import economics, prices_frame
from backpressure.generator.plan.frame import concurrency_frame, results_frame
from backpressure.generator.plan.rank import plain, ranking
from backpressure.generator.records import Curves, ResultRow
from backpressure.generator.site.links import has_page, row_url
from backpressure.generator.site.pages import device_name

# Device kinds a ranking filters on: id -> label.
DEVICE_KINDS = {
    "discrete": "GPU",
    "rig": "multi-GPU rig",
    "unified": "unified memory",
    "cpu": "CPU (system memory)",
}

# Fields taken from the result row as they are.
ROW_FIELDS = (
    "gpu",
    "gpu_count",
    "model",
    "quant",
    "runtime",
    "kv_dtype",
    "context",
    "fits",
    "usable",
    "fails_at_any_load",
    "slots",
    "shortfall_bytes",
    "max_concurrency",
    "binding_ceiling",
    "saturation_bound",
    "error_band_pct",
    "serving_band_pct",
    "single_stream_tokens_per_s",
    "breaking_rule",
    *(f"{k}{s}" for k in ("saturation_rps", "breaking_rps") for s in ("", "_low", "_high")),
    "shed_onset_rps",
    "p99_break_rps",
    "ttft_break_rps",
    "soak_break_rps",
)

# Fields from the ranking frame: JSON name -> column.
RANK_FIELDS = {
    "status": "status",
    "tokens_per_s_per_user": "tokens_per_user_breaking",
    "usd_per_hour": "usd_per_hour",
    "price_basis": "price_basis",
    "price_as_of": "price_as_of",
    "unpriced_reason": "unpriced_reason",
    "usd_per_million_output_tokens": "usd_per_mtok_breaking",
    "usd_per_million_output_tokens_low": "usd_per_mtok_breaking_low",
    "usd_per_million_output_tokens_high": "usd_per_mtok_breaking_high",
    "tokens_per_joule": "tokens_per_joule_breaking",
}


def device_kind(cat: Catalog, device: str) -> str | None:
    """A device's kind (a key of :data:`DEVICE_KINDS`); None if the catalog lacks it."""
    if device in cat.rigs:
        return "rig"
    gpu = cat.gpus.get(device)
    if gpu is None:
        return None
    return "cpu" if gpu.memory_kind == "system" else gpu.memory_kind


def _frame(cat: Catalog, rows: list[ResultRow]) -> pd.DataFrame:
    """The economics frame of ``rows`` (devices the catalog lacks stay unpriced)."""
    results = results_frame(rows)
    known = [d for d in results["gpu"].unique() if d in cat.gpus or d in cat.rigs]
    return economics(results, prices_frame(cat, known), cat.settings.output_tokens)


def model_configs(
    cat: Catalog,
    rows: Iterable[ResultRow],
    curves: Mapping[str, Curves],
    site_url: str = "",
) -> dict[str, list[dict[str, Any]]]:
    """Per model id (in first-seen order), its configs as JSON objects sorted by id."""
    rows = list(rows)
    if not rows:
        return {}
    econ = _frame(cat, rows)
    conc = concurrency_frame(curves[r.config_id] for r in rows if r.config_id in curves)
    by_id = {r.config_id: r for r in rows}
    out: dict[str, list[dict[str, Any]]] = {}
    for model in dict.fromkeys(r.model for r in rows):
        ranked = ranking(econ, model, conc)
        cols = ["config_id", *RANK_FIELDS.values()]
        table = {t[0]: t[1:] for t in ranked[cols].itertuples(index=False, name=None)}
        configs = []
        for cid in sorted(table):
            r = by_id[cid]
            item: dict[str, Any] = {
                "id": cid,
                "url": f"{site_url}/{row_url(r)}" if site_url else row_url(r),
                "page": has_page(r),
                "gpu_name": device_name(cat, r.gpu),
                "device_kind": device_kind(cat, r.gpu),
            }
            item.update((f, plain(getattr(r, f))) for f in ROW_FIELDS)
            item.update((name, plain(v)) for name, v in zip(RANK_FIELDS, table[cid], strict=True))
            configs.append(item)
        out[model] = configs
    return out
