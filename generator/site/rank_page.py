"""What the ranking page of a model (``model/<id>/rank/``) and the compare page say.

Both pages are built in the browser from the model's JSON index
(:mod:`backpressure.generator.site.model_json`), fetched relative to the page;
their Markdown carries the controls, the legend and, for the ranking, the chart
data (packed as every page packs it, :mod:`~backpressure.generator.site.chart_pack`).
"""

from __future__ import annotations

from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.records import context_label
from backpressure.generator.site import gate
from backpressure.generator.site.chart_pack import pack
from backpressure.generator.site.model_json import DEVICE_KINDS
from backpressure.generator.site.pages import Limits

ROOT = "../../../"  # from model/<id>/rank/ back to the site root


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def cost_points(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cost chart's points: every priced config with a rate and a speed per user."""
    need = ("usd_per_million_output_tokens", "tokens_per_s_per_user")
    return [
        {
            # the id, not the display name: catalog prose stays out of scripts,
            # even a JSON data block (the table beside the chart shows the name)
            "device": c["gpu"],
            "id": c["id"],  # the table's row: the chart follows the table's filters
            "quant": c["quant"],
            "context": context_label(c["context"]),
            "kind": DEVICE_KINDS.get(c["device_kind"] or "", "other"),
            "per_user": _sig(c["tokens_per_s_per_user"]),
            "cost": _sig(c["usd_per_million_output_tokens"]),
            "lo": _sig(c["usd_per_million_output_tokens_low"]),
            "hi": _sig(c["usd_per_million_output_tokens_high"]),
        }
        for c in configs
        if all(c.get(k) is not None and c[k] > 0 for k in need)
    ]


def rank_context(
    cat: Catalog, model: str, configs: list[dict[str, Any]], lim: Limits
) -> dict[str, Any]:
    """The ranking page of ``model``: its filters' choices, the chart data, the limits."""
    points = cost_points(configs)
    data = {"cost": {"cost": points}} if points else {}
    gate.check_data(f"model {model}: ranking chart data", data)
    present = {c["device_kind"] for c in configs}
    kinds = [k for k in DEVICE_KINDS if k in present]
    quants = sorted({c["quant"] for c in configs})
    return {
        "id": model,
        "name": cat.models[model].name if model in cat.models else model,
        "root": ROOT,
        "json_url": f"{ROOT}api/models/{model}.json",
        "contexts": [(c, context_label(c)) for c in sorted({c["context"] for c in configs})],
        "quants": [(q, cat.quants[q].name if q in cat.quants else q) for q in quants],
        "kinds": [(k, DEVICE_KINDS[k]) for k in kinds],
        "total": len(configs),
        "serving": sum(c["status"] == "serves" for c in configs),
        "chart_data": pack(data),
        "has_chart": bool(points),
        "limits": lim,
        "output_tokens": cat.settings.output_tokens,
    }
