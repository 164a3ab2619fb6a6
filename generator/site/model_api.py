"""The machine-readable data beside the pages: one JSON index per model, and an index of those.

``api/models/<model>.json`` holds one object per config of the model (every
device, quant, context), sorted by id, written canonically (sorted keys,
compact) with one config per line, so a rebuild's diff is one line per change
and ``backpressure verify`` can compare a config's line byte for byte.
``api/models.json`` lists the model files. Both are small enough for a page to
fetch (a model's file is a few hundred kilobytes, a tenth of that gzipped).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from backpressure.catalog.loader import Catalog
from backpressure.generator.plan.economics import DevicePrice, device_price, usd_per_mtok
from backpressure.generator.records import ResultRow
from backpressure.generator.site.escape import json_text
from backpressure.generator.site.links import has_page, row_url

INDEX = "api/models.json"
FIELDS = (
    "gpu",
    "model",
    "quant",
    "context",
    "kv_dtype",
    "runtime",
    "fits",
    "slots",
    "usable",
    "fails_at_any_load",
    "binding_ceiling",
    "saturation_bound",
    "max_concurrency",
    "error_band_pct",
    "serving_band_pct",
    "breaking_rule",
    *(f"{k}{s}" for k in ("saturation_rps", "breaking_rps") for s in ("", "_low", "_high")),
    "shed_onset_rps",
    "p99_break_rps",
    "ttft_break_rps",
    "soak_break_rps",
)


def model_file(model: str) -> str:
    """Site path of a model's JSON index."""
    return f"api/models/{model}.json"


def _num(value: float) -> float | None:
    """A cost to four significant figures (no price is known better), None for no figure."""
    return None if math.isnan(value) else float(f"{value:.4g}")


class Prices:
    """Each device's hourly price (plan/economics.py), looked up once per device."""

    def __init__(self, cat: Catalog) -> None:
        self.cat = cat
        self.output_tokens = cat.settings.output_tokens
        self._known: dict[str, DevicePrice | None] = {}

    def of(self, device: str) -> DevicePrice | None:
        """The device's price on the default basis; None if the catalog prices it not."""
        if device not in self._known:
            try:
                self._known[device] = device_price(self.cat, device)
            except LookupError:
                self._known[device] = None
        return self._known[device]

    def fields(self, row: ResultRow) -> dict[str, Any]:
        """$/hour of the device and $/million output tokens at the breaking rate (with band)."""
        price = self.of(row.gpu)
        usd = None if price is None else price.usd_per_hour
        out: dict[str, Any] = {
            "usd_per_hour": None if usd is None else _num(usd),
            "price_basis": price and price.basis,
        }
        rates = (row.breaking_rps, row.breaking_rps_high, row.breaking_rps_low)
        for end, rate in zip(("", "_low", "_high"), rates, strict=True):
            cost = None
            if usd is not None and rate is not None:
                value = usd_per_mtok(np.array([usd]), np.array([rate]), self.output_tokens)
                cost = _num(value[0])
            out[f"usd_per_million_output_tokens{end}"] = cost
        return out


def config_item(row: ResultRow, site_url: str, prices: Prices) -> dict[str, Any]:
    """One config's object in its model's JSON index."""
    url = row_url(row)
    return {
        "id": row.config_id,
        "url": f"{site_url}/{url}" if site_url else url,
        "page": has_page(row),
        **{k: getattr(row, k) for k in FIELDS},
        **prices.fields(row),
    }


def config_line(row: ResultRow, site_url: str, prices: Prices) -> str:
    """One config's line of its model's JSON index (without the separating comma)."""
    return json_text(config_item(row, site_url, prices))


def frame(cat: Catalog, model: str) -> tuple[str, str]:
    """The text before and after the config lines of a model's index."""
    name = cat.models[model].name if model in cat.models else model
    return '{"configs":[\n', "\n]," + json_text({"model": model, "name": name})[1:] + "\n"


def model_json(cat: Catalog, model: str, rows: Iterable[ResultRow], site_url: str) -> str:
    """``api/models/<model>.json``: every config of the model, sorted by id, one per line."""
    prices = Prices(cat)
    lines = [config_line(r, site_url, prices) for r in sorted(rows, key=lambda r: r.config_id)]
    head, tail = frame(cat, model)
    return head + ",\n".join(lines) + tail


def index_json(cat: Catalog, by_model: dict[str, list[ResultRow]], site_url: str) -> str:
    """``api/models.json``: one line per model file, with its config counts."""
    counts = {m: (len(rows), sum(r.fits for r in rows)) for m, rows in by_model.items()}
    return index_text(cat, counts, site_url)


def index_text(cat: Catalog, counts: Mapping[str, tuple[int, int]], site_url: str) -> str:
    """``api/models.json`` from each model's (configs, configs that fit)."""
    items = []
    for mid in sorted(counts):
        url = model_file(mid)
        configs, fits = counts[mid]
        items.append(
            {
                "model": mid,
                "name": cat.models[mid].name if mid in cat.models else mid,
                "url": f"{site_url}/{url}" if site_url else url,
                "configs": configs,
                "fits": fits,
            }
        )
    return "[\n" + ",\n".join(json_text(i) for i in items) + "\n]\n"
