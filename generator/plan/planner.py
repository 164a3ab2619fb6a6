"""The planner: which devices, rigs and quants serve a model at a target rate, and at what cost.

For each config of the model at the target's context that serves (see
:func:`backpressure.generator.plan.rank.status`):

- **replicas** are counted from the low end of the band, so the plan holds
  when the estimate is optimistic: ``ceil(R / breaking_rps_low)``;
- with a **TPOT target** ``Y``, a replica offered ``R / k`` requests/s runs at
  the closed-loop point that carries that rate
  (:mod:`backpressure.generator.plan.concurrency`); the plan takes the fewest
  replicas ``k`` (at least the count above) whose point has a mean TPOT of at
  most ``Y``, using the TPOT rate's low end like the breaking rate's:
  ``k >= ceil(R / (tpot_rate x (1 - band)))``. A config whose single user
  already exceeds ``Y`` cannot meet it;
- the cost is ``replicas x usd_per_hour`` per hour, and per million output
  tokens at the target rate ``R`` (the rate actually served, over the replicas
  actually paid for); a budget (``max_usd_per_hour``) drops plans above it and
  plans with no price (they cannot be shown to fit it).

Plans are ranked by total cost per hour (unpriced last), then fewer replicas,
then config id. When no config meets the target, the closest are the serving
configs with the highest rate (low end), each with the reason it misses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from backpressure.generator.plan.concurrency import point_at_rate, tpot_rate
from backpressure.generator.plan.economics import SECONDS_PER_HOUR
from backpressure.generator.plan.rank import status

CLOSEST = 3  # configs named when nothing meets the target

PLAN_COLUMNS = (
    "config_id",
    "permalink",
    "device",
    "gpu_count",
    "model",
    "quant",
    "runtime",
    "kv_dtype",
    "context",
    "replicas",
    "replicas_for_rate",
    "replicas_for_tpot",
    "rps_per_replica",
    "users_per_replica",
    "tpot_ms",
    "tokens_per_user",
    "breaking_rps",
    "breaking_rps_low",
    "breaking_rps_high",
    "breaking_rule",
    "band_pct",
    "band_reason",
    "tpot_rate_rps",
    "usd_per_hour",
    "usd_per_hour_total",
    "usd_per_million_output_tokens",
    "price_basis",
    "price_source",
    "price_as_of",
    "price_quote",
    "electricity_as_of",
    "unpriced_reason",
)


@dataclass(frozen=True, slots=True)
class Target:
    """What has to be served: a model at a rate and context, with optional limits.

    ``quants`` and ``devices`` narrow the candidates (empty: all);
    ``output_tokens`` is the request profile's output length the rates were
    found for (it turns requests into tokens for the cost per token).
    """

    model: str
    rps: float
    context: int
    output_tokens: int
    quants: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    tpot_ms: float | None = None
    max_usd_per_hour: float | None = None


@dataclass(frozen=True)
class Plan:
    """The planner's answer: ranked ``plans``; when there are none, the ``closest`` configs.

    ``excluded`` counts the candidates that miss the target, by reason.
    """

    target: Target
    plans: pd.DataFrame
    closest: pd.DataFrame
    excluded: dict[str, int]


# A quotient within this share of a whole number counts as that number: float
# division gives 2.1 / 0.3 = 7.000000000000001, which is 7 replicas, not 8.
CEIL_SLACK = 1e-12


def replicas_needed(rps: float, rate: np.ndarray) -> np.ndarray:
    """``ceil(rps / rate)`` per rate: NaN kept, 0 for an infinite rate (it never binds)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = rps / rate
    return np.where(np.isinf(rate), 0.0, np.ceil(q * (1 - CEIL_SLACK)))


def size(
    rows: pd.DataFrame,
    concurrency: pd.DataFrame,
    rps: float,
    output_tokens: int,
    tpot_ms: float | None = None,
) -> pd.DataFrame:
    """Replicas, per-replica load and cost of serving ``rps`` with each config in ``rows``.

    ``rows`` is an economics frame of serving configs. Adds the plan columns of
    :data:`PLAN_COLUMNS` (``replicas`` is NA where the TPOT target cannot be met).
    """
    out = rows.copy()
    low = out["breaking_rps_low"].to_numpy(dtype="float64", na_value=np.nan)
    pct = out["serving_band_pct"].to_numpy(dtype="float64", na_value=np.nan) / 100
    for_rate = replicas_needed(rps, low)
    for_tpot = np.zeros(len(out))
    tpot_rate_rps = np.full(len(out), np.nan)
    if tpot_ms is not None:
        rate = tpot_rate(concurrency, tpot_ms)
        tpot_rate_rps = out["config_id"].map(rate).to_numpy(dtype="float64", na_value=np.nan)
        for_tpot = replicas_needed(rps, tpot_rate_rps * (1 - pct))
    replicas = np.fmax(for_rate, for_tpot)
    replicas = np.where(np.isnan(for_tpot) | np.isnan(for_rate), np.nan, np.maximum(replicas, 1))
    out["replicas_for_rate"] = pd.array(for_rate, dtype="Float64").astype("Int64")
    out["replicas_for_tpot"] = (
        pd.array(for_tpot, dtype="Float64").astype("Int64")
        if tpot_ms is not None
        else pd.array([pd.NA] * len(out), dtype="Int64")
    )
    out["replicas"] = pd.array(replicas, dtype="Float64").astype("Int64")
    out["tpot_rate_rps"] = tpot_rate_rps
    per_replica = rps / replicas
    out["rps_per_replica"] = per_replica
    at = point_at_rate(concurrency, pd.Series(per_replica, index=out["config_id"].to_numpy()))
    out["users_per_replica"] = out["config_id"].map(at["users"]).astype("Int64")
    out["tpot_ms"] = out["config_id"].map(at["tpot_ms"]).astype("float64")
    out["tokens_per_user"] = out["config_id"].map(at["tokens_per_user"]).astype("float64")
    usd = out["usd_per_hour"].to_numpy(dtype="float64", na_value=np.nan)
    out["usd_per_hour_total"] = replicas * usd
    out["usd_per_million_output_tokens"] = (
        replicas * usd * 1e6 / (rps * output_tokens * SECONDS_PER_HOUR)
    )
    out["device"] = out["gpu"]
    out["band_pct"] = out["serving_band_pct"]
    out["band_reason"] = out["serving_band_reason"]
    return out


def _why_not(sized: pd.DataFrame, target: Target, concurrency: pd.DataFrame) -> pd.Series:
    """Why each serving config misses the target (NA where it meets it)."""
    why = pd.Series(pd.NA, index=sized.index, dtype="string")
    if target.tpot_ms is not None:
        one = concurrency[concurrency["users"] == 1].set_index("config_id")["tpot_ms"]
        miss = sized["replicas"].isna()
        why[miss] = [
            f"TPOT {one.get(cid, math.nan):,.1f} ms with one user, over {target.tpot_ms:g} ms"
            for cid in sized.loc[miss, "config_id"]
        ]
    if target.max_usd_per_hour is not None:
        budget = target.max_usd_per_hour
        total = sized["usd_per_hour_total"]
        over = why.isna() & (total > budget)
        why[over] = [
            f"${t:,.2f}/h for {n:,} replicas, over ${budget:g}/h"
            for t, n in zip(
                sized.loc[over, "usd_per_hour_total"], sized.loc[over, "replicas"], strict=True
            )
        ]
        unpriced = why.isna() & total.isna()
        why[unpriced] = [f"unpriced ({r})" for r in sized.loc[unpriced, "unpriced_reason"]]
    return why


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(
        ["usd_per_hour_total", "replicas", "config_id"], na_position="last", kind="stable"
    ).reset_index(drop=True)


def _closest(candidates: pd.DataFrame, n: int) -> pd.DataFrame:
    ordered = candidates.sort_values(
        ["breaking_rps_low", "config_id"], ascending=[False, True], kind="stable"
    )
    return ordered.head(n).reset_index(drop=True)


def plan(
    econ: pd.DataFrame,
    concurrency: pd.DataFrame,
    target: Target,
    closest: int = CLOSEST,
) -> Plan:
    """Every config of the target's model and context that meets it, ranked by cost.

    ``econ`` is an economics frame holding (at least) the model's configs,
    ``concurrency`` their closed-loop tables.
    """
    rows = econ[econ["model"] == target.model]
    if target.quants:
        rows = rows[rows["quant"].isin(list(target.quants))]
    if target.devices:
        rows = rows[rows["gpu"].isin(list(target.devices))]
    codes = status(rows)
    at_context = rows["context"] == target.context
    excluded = {
        f"{code} at this context": int(n)
        for code, n in codes[at_context & (codes != "serves")].value_counts().sort_index().items()
    }
    serving = rows[at_context & (codes == "serves")]
    sized = size(serving, concurrency, target.rps, target.output_tokens, target.tpot_ms)
    sized["why_not"] = _why_not(sized, target, concurrency)
    for reason, n in (
        sized["why_not"].dropna().map(_reason_kind).value_counts().sort_index().items()
    ):
        excluded[str(reason)] = int(n)
    meets = _order(sized[sized["why_not"].isna()])
    near = sized.iloc[0:0]
    if meets.empty:
        near = _closest(sized, closest)
        if near.empty:  # nothing serves at this context: the best at any context
            elsewhere = rows[codes == "serves"]
            near = size(_closest(elsewhere, closest), concurrency, target.rps, target.output_tokens)
            near["why_not"] = [f"serves at {c:,} tokens of context only" for c in near["context"]]
    return Plan(target, meets[_columns(meets)], near[_columns(near, "why_not")], excluded)


def _reason_kind(why: str) -> str:
    """The kind of a miss, for the excluded counts."""
    if why.startswith("TPOT"):
        return "misses the TPOT target"
    if why.startswith("unpriced"):
        return "no price to hold against the budget"
    return "over the budget"


def _columns(frame: pd.DataFrame, *extra: str) -> list[str]:
    return [c for c in (*PLAN_COLUMNS, *extra) if c in frame]


def contexts_for(swept: Sequence[int], max_context: int, need: int) -> list[int]:
    """Swept contexts a model offers that hold a request of ``need`` tokens, ascending."""
    return sorted(c for c in swept if need <= c <= max_context)
