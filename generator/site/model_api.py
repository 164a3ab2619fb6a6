"""The machine-readable data beside the pages: one JSON index per model, and an index of those.

``api/models/<model>.json`` holds one object per config of the model (every
device, quant, context; what each says: :mod:`backpressure.generator.site.model_json`),
sorted by id, written canonically (sorted keys, compact, markup characters
escaped) with one config per line, so a rebuild's diff is one line per change
and ``backpressure verify`` can compare a config's line byte for byte. The
ranking and compare pages fetch the same file. ``api/models.json`` lists the
model files. A model's file is about a megabyte, a twentieth of that gzipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.records import ResultRow
from backpressure.generator.site.escape import json_text

INDEX = "api/models.json"


def model_file(model: str) -> str:
    """Site path of a model's JSON index."""
    return f"api/models/{model}.json"


def frame(cat: Catalog, model: str) -> tuple[str, str]:
    """The text before and after the config lines of a model's index."""
    name = cat.models[model].name if model in cat.models else model
    return '{"configs":[\n', "\n]," + json_text({"model": model, "name": name})[1:] + "\n"


def model_json(cat: Catalog, model: str, configs: list[dict[str, Any]]) -> str:
    """``api/models/<model>.json``: the model's config objects (sorted by id), one per line."""
    head, tail = frame(cat, model)
    return head + ",\n".join(json_text(c) for c in configs) + tail


def index_json(cat: Catalog, by_model: Mapping[str, list[ResultRow]], site_url: str) -> str:
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
