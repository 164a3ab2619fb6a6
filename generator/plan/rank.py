"""Rankings: per model, every device x quant at each context, with sortable keys.

Built on :func:`backpressure.generator.plan.economics.economics` frames. Every
config of the model stays in a ranking, including those that publish no rate:
``status`` says which (``serves``, ``fails-at-any-load``, ``too-slow``,
``does-not-fit``, ``not-simulated``) and ``verdict`` explains it in words.

Choosing for someone (the default order, the best config of a device) counts
from the low end of the band, as the planner does: a config is ranked by the
rate it holds when the estimate is optimistic. Ties are broken by config id,
so every ordering is total and the same run after run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from backpressure.catalog.loader import Catalog
from backpressure.generator.plan.concurrency import point_at_rate
from backpressure.generator.text import sig

STATUSES = ("serves", "fails-at-any-load", "too-slow", "does-not-fit", "not-simulated")

# Sortable keys of a ranking: name -> (column, ascending). NaN sorts last either way.
SORT_KEYS: dict[str, tuple[str, bool]] = {
    "rate": ("breaking_rps_low", False),
    "rate_point": ("breaking_rps", False),
    "saturation": ("saturation_rps_low", False),
    "tokens_per_user": ("tokens_per_user_breaking", False),
    "single_stream": ("single_stream_tokens_per_s", False),
    "cost": ("usd_per_mtok_breaking_high", True),
    "cost_point": ("usd_per_mtok_breaking", True),
    "usd_per_hour": ("usd_per_hour", True),
    "tokens_per_joule": ("tokens_per_joule_breaking_low", False),
    "context": ("context", True),
    "id": ("config_id", True),
}

RANKING_COLUMNS = (
    "config_id",
    "permalink",
    "gpu",
    "gpu_count",
    "model",
    "quant",
    "runtime",
    "kv_dtype",
    "context",
    "status",
    "verdict",
    "bottleneck",
    "slots",
    "max_concurrency",
    "breaking_rps",
    "breaking_rps_low",
    "breaking_rps_high",
    "breaking_rule",
    "ttft_break_rps",
    "p99_break_rps",
    "shed_onset_rps",
    "soak_break_rps",
    "slo_rps",
    "saturation_rps",
    "saturation_rps_low",
    "saturation_rps_high",
    "serving_band_pct",
    "serving_band_reason",
    "single_stream_tokens_per_s",
    "single_ttft_ms",
    "users_at_breaking",
    "tokens_per_user_breaking",
    "usd_per_hour",
    "price_basis",
    "price_as_of",
    "price_source",
    "price_quote",
    "electricity_as_of",
    "unpriced_reason",
    "power_w",
    "usd_per_mtok_breaking",
    "usd_per_mtok_breaking_low",
    "usd_per_mtok_breaking_high",
    "usd_per_mtok_slo",
    "usd_per_mtok_slo_low",
    "usd_per_mtok_slo_high",
    "usd_per_mtok_saturation",
    "usd_per_mtok_saturation_low",
    "usd_per_mtok_saturation_high",
    "tokens_per_joule_breaking",
    "tokens_per_joule_breaking_low",
    "tokens_per_joule_breaking_high",
)


def status(results: pd.DataFrame) -> pd.Series:
    """Why a config does or does not publish a breaking rate, one code per row."""
    fits = results["fits"].to_numpy(dtype=bool)
    usable = results["usable"].fillna(False).to_numpy(dtype=bool)
    simulated = results["usable"].notna().to_numpy(dtype=bool)
    fails = results["fails_at_any_load"].fillna(False).to_numpy(dtype=bool)
    rate = results["breaking_rps"].notna().to_numpy(dtype=bool)
    codes = np.select(
        [~fits, ~simulated, ~usable, fails | ~rate],
        ["does-not-fit", "not-simulated", "too-slow", "fails-at-any-load"],
        default="serves",
    )
    return pd.Series(codes, index=results.index, dtype="string")


def sort_frame(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Rows ordered by the named :data:`SORT_KEYS`, NaN last, ties by config id."""
    columns = [SORT_KEYS[k][0] for k in keys]
    ascending = [SORT_KEYS[k][1] for k in keys]
    if "config_id" not in columns:
        columns.append("config_id")
        ascending.append(True)
    ordered = frame.sort_values(columns, ascending=ascending, na_position="last", kind="stable")
    return ordered.reset_index(drop=True)


def ranking(
    econ: pd.DataFrame, model: str, concurrency: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Every config of ``model``: by context, then serving ones by rate (low end), then id.

    ``econ`` is an economics frame; with ``concurrency`` (the sweep's tables)
    ``users_at_breaking`` and ``tokens_per_user_breaking`` say how many requests
    a replica holds at its breaking rate and the decode speed each user sees
    there (:func:`~backpressure.generator.plan.concurrency.point_at_rate`).
    """
    rows = econ[econ["model"] == model].copy()
    rows["status"] = status(rows)
    rows["users_at_breaking"] = pd.Series(pd.NA, index=rows.index, dtype="Int64")
    rows["tokens_per_user_breaking"] = np.nan
    if concurrency is not None and len(rows):
        at = point_at_rate(concurrency, rows.set_index("config_id")["breaking_rps"])
        ids = rows["config_id"]
        rows["users_at_breaking"] = ids.map(at["users"]).astype("Int64")
        rows["tokens_per_user_breaking"] = ids.map(at["tokens_per_user"]).astype("float64")
    rows["_status_order"] = rows["status"].map({s: i for i, s in enumerate(STATUSES)})
    ordered = rows.sort_values(
        ["context", "_status_order", "breaking_rps_low", "config_id"],
        ascending=[True, True, False, True],
        na_position="last",
        kind="stable",
    )
    return ordered[[c for c in RANKING_COLUMNS if c in ordered]].reset_index(drop=True)


def best_for_device(
    econ: pd.DataFrame, device: str, contexts: Sequence[int] | None = None
) -> pd.DataFrame:
    """What a device serves best: per model and context, its highest-rate config (low end).

    Only configs that serve count; models are in id order, contexts ascending.
    """
    rows = econ[econ["gpu"] == device].copy()
    rows["status"] = status(rows)
    rows = rows[rows["status"] == "serves"]
    if contexts is not None:
        rows = rows[rows["context"].isin(list(contexts))]
    ordered = rows.sort_values(
        ["model", "context", "breaking_rps_low", "config_id"],
        ascending=[True, True, False, True],
        kind="stable",
    )
    best = ordered.groupby(["model", "context"], sort=False).head(1)
    return best[[c for c in RANKING_COLUMNS if c in best]].reset_index(drop=True)


def with_names(frame: pd.DataFrame, cat: Catalog) -> pd.DataFrame:
    """Add ``device_name``, ``model_name`` and ``quant_name`` from the catalog (ids kept)."""
    devices = {
        **{k: v.name for k, v in cat.gpus.items()},
        **{k: v.name for k, v in cat.rigs.items()},
    }
    out = frame.copy()
    out["device_name"] = out["gpu"].map(devices).astype("string")
    out["model_name"] = (
        out["model"].map({k: v.name for k, v in cat.models.items()}).astype("string")
    )
    out["quant_name"] = (
        out["quant"].map({k: v.name for k, v in cat.quants.items()}).astype("string")
    )
    return out


def plain(value: Any) -> Any:
    """A frame cell as JSON: None for NaN and NA, Python scalars, floats to 6 digits."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return value if math.isinf(value) else sig(value)
    return value


def records(frame: pd.DataFrame, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts, in frame order (see :func:`plain`)."""
    cols = list(columns) if columns is not None else list(frame.columns)
    return [
        {c: plain(v) for c, v in zip(cols, row, strict=True)}
        for row in frame[cols].itertuples(index=False, name=None)
    ]


# The few columns a per-model JSON index carries: names, rates by rule, costs.
INDEX_COLUMNS = (
    "config_id",
    "permalink",
    "gpu",
    "quant",
    "context",
    "status",
    "breaking_rps",
    "breaking_rps_low",
    "breaking_rps_high",
    "breaking_rule",
    "ttft_break_rps",
    "p99_break_rps",
    "shed_onset_rps",
    "soak_break_rps",
    "saturation_rps",
    "single_stream_tokens_per_s",
    "tokens_per_user_breaking",
    "usd_per_hour",
    "price_as_of",
    "usd_per_mtok_breaking",
    "usd_per_mtok_breaking_low",
    "usd_per_mtok_breaking_high",
    "tokens_per_joule_breaking",
)


def model_index(ranked: pd.DataFrame) -> list[dict[str, Any]]:
    """A ranking as the small per-model JSON index (:data:`INDEX_COLUMNS`, in ranking order)."""
    return records(ranked, [c for c in INDEX_COLUMNS if c in ranked])
