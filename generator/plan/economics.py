"""What a config costs to run, and what it delivers per dollar and per joule.

Prices come from the catalog, each with its source and date: a device's
``rental_prices`` and ``purchase_prices`` each mark one quote ``default: true``
with a ``default_reason`` (the catalog's choice, e.g. a marketplace's median
over providers rather than its cheapest offer); that quote is the one used.

The hourly cost of a device of ``n`` GPUs (a rig has ``n > 1``):

- **rental**: ``usd_per_gpu_hour x n``. An on-demand price already pays for
  power, hosting and the host machine: nothing is added.
- **owned**: ``n x purchase_usd / (amortisation_years x 8,760 h)`` (straight
  line, no resale value, the card or machine alone) plus
  ``n x board_power_w / 1000 x usd_per_kwh`` (rated power drawn every hour, the
  figure ``board_power_kind`` describes; for a card, the host around it is not
  counted).

``basis`` picks between them: ``auto`` takes the rental price where the catalog
lists one and the owned cost otherwise (a device someone rents out is one a
buyer can rent; consumer cards and Apple machines are bought); ``rental`` and
``owned`` use only that basis.

Per config, at a rate ``r`` [requests/s] of ``O`` output tokens each:

- ``usd_per_mtok = usd_per_hour x 1e6 / (3600 x r x O)``, per million output
  tokens (prompt tokens are not counted);
- ``tokens_per_joule = r x O / (board_power_w x n)``, at rated power.

Each is given at three rates, each with its band: the **breaking rate** (every
failure rule holds below it: the rate a replica can be run at), the **SLO
rate** (the lower of the TTFT and p99 rules' own breaking rates: where the
latency SLO alone gives out, None when no run crossed it) and the **saturation
rate** (the closed-loop throughput ceiling: what the rig costs per token run
flat out, as batch jobs and throughput benchmarks run it). A band's ``_low``
cost comes from the rate's ``_high`` end and the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from backpressure.catalog.loader import Catalog
from backpressure.catalog.schema import Gpu
from backpressure.generator import resolve

Basis = Literal["auto", "rental", "owned"]
BASES: tuple[Basis, ...] = ("auto", "rental", "owned")
HOURS_PER_YEAR = 365 * 24  # 8,760 h: amortisation counts calendar years of 365 days
SECONDS_PER_HOUR = 3600
# The rates costs are given at, each with its band columns (name -> results column).
RATES = {"breaking": "breaking_rps", "slo": "slo_rps", "saturation": "saturation_rps"}
Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class DevicePrice:
    """What one device (all its GPUs) costs per hour, and where the figure comes from.

    ``usd_per_hour = capital_usd_per_hour + energy_usd_per_hour``; a rental has
    no energy part (the price includes it). ``as_of`` is the quote's date,
    ``electricity_as_of`` the electricity price's (owned only).
    """

    device: str
    gpu_count: int
    basis: Literal["rental", "owned"]
    usd_per_hour: float
    capital_usd_per_hour: float
    energy_usd_per_hour: float
    as_of: str
    source: str
    quote: str
    electricity_as_of: str | None


def _gpu_and_count(cat: Catalog, device: str) -> tuple[Gpu, int]:
    gpu = resolve.gpu_entry(cat, device)  # raises LookupError_ with the nearest ids
    return gpu, cat.rigs[device].count if device in cat.rigs else 1


def power_w(cat: Catalog, device: str) -> float | None:
    """Rated power of a device, all its GPUs [W]; None where the catalog has no figure."""
    gpu, n = _gpu_and_count(cat, device)
    return None if gpu.board_power_w is None else gpu.board_power_w * n


def rental_price(cat: Catalog, device: str) -> DevicePrice | None:
    """The device's default on-demand quote times its GPUs; None without one."""
    gpu, n = _gpu_and_count(cat, device)
    quote = next((q for q in gpu.rental_prices if q.default), None)
    if quote is None:
        return None
    usd = quote.usd_per_gpu_hour * n
    what = quote.provider + (f", {quote.offer}" if quote.offer else "")
    return DevicePrice(
        device, n, "rental", usd, usd, 0.0, quote.as_of.isoformat(), quote.source, what, None
    )


def owned_price(cat: Catalog, device: str) -> DevicePrice | None:
    """Purchase amortised plus electricity at rated power; None without both figures."""
    gpu, n = _gpu_and_count(cat, device)
    quote = next((q for q in gpu.purchase_prices if q.default), None)
    if quote is None or gpu.board_power_w is None:
        return None
    s = cat.settings
    capital = n * quote.usd / (s.amortisation_years * HOURS_PER_YEAR)
    energy = n * gpu.board_power_w / 1000 * s.electricity.usd_per_kwh
    return DevicePrice(
        device,
        n,
        "owned",
        capital + energy,
        capital,
        energy,
        quote.as_of.isoformat(),
        quote.source,
        f"{quote.item} ({quote.kind})",
        s.electricity.as_of.isoformat(),
    )


def device_price(cat: Catalog, device: str, basis: Basis = "auto") -> DevicePrice | None:
    """The hourly cost of a device on ``basis`` (see the module docstring); None if unpriced."""
    if basis == "rental":
        return rental_price(cat, device)
    if basis == "owned":
        return owned_price(cat, device)
    return rental_price(cat, device) or owned_price(cat, device)


def unpriced_reason(cat: Catalog, device: str, basis: Basis = "auto") -> str | None:
    """Why :func:`device_price` gives None for a device, in a few words (None if priced)."""
    if device_price(cat, device, basis) is not None:
        return None
    gpu, _ = _gpu_and_count(cat, device)
    no_owned = (
        "no board power in the catalog to cost its electricity"
        if gpu.purchase_prices
        else "no purchase price in the catalog"
    )
    if basis == "rental":
        return "no rental price in the catalog"
    if basis == "owned" or gpu.purchase_prices:
        return no_owned
    return "no price in the catalog"


PRICE_COLUMNS = {
    "gpu": "string",
    "price_basis": "string",
    "usd_per_hour": "float64",
    "capital_usd_per_hour": "float64",
    "energy_usd_per_hour": "float64",
    "price_as_of": "string",
    "price_source": "string",
    "price_quote": "string",
    "electricity_as_of": "string",
    "unpriced_reason": "string",
    "power_w": "float64",
}


def prices_frame(cat: Catalog, devices: Iterable[str], basis: Basis = "auto") -> pd.DataFrame:
    """One row per device id (column ``gpu``, as in results.csv) with its price and power."""
    records = []
    for device in sorted(set(devices)):
        p = device_price(cat, device, basis)
        base = asdict(p) if p is not None else {}
        records.append(
            {
                "gpu": device,
                "price_basis": base.get("basis"),
                "usd_per_hour": base.get("usd_per_hour"),
                "capital_usd_per_hour": base.get("capital_usd_per_hour"),
                "energy_usd_per_hour": base.get("energy_usd_per_hour"),
                "price_as_of": base.get("as_of"),
                "price_source": base.get("source"),
                "price_quote": base.get("quote"),
                "electricity_as_of": base.get("electricity_as_of"),
                "unpriced_reason": unpriced_reason(cat, device, basis),
                "power_w": power_w(cat, device),
            }
        )
    return pd.DataFrame(
        {
            name: pd.Series([r[name] for r in records], dtype=dt)
            for name, dt in PRICE_COLUMNS.items()
        }
    )


def _f(frame: pd.DataFrame, column: str) -> Array:
    """A column as float64, missing values as NaN."""
    return frame[column].to_numpy(dtype="float64", na_value=np.nan)


def usd_per_mtok(usd_per_hour: Array, rate_rps: Array, output_tokens: int) -> Array:
    """Cost per million output tokens at a rate [USD / 1e6 tokens]; NaN where undefined."""
    tokens_per_hour = rate_rps * output_tokens * SECONDS_PER_HOUR
    with np.errstate(divide="ignore", invalid="ignore"):
        out = usd_per_hour * 1e6 / tokens_per_hour
    return np.where(tokens_per_hour > 0, out, np.nan)


def tokens_per_joule(rate_rps: Array, output_tokens: int, watts: Array) -> Array:
    """Output tokens per joule at rated power [tokens/J]; NaN where undefined."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = rate_rps * output_tokens / watts
    return np.where(watts > 0, out, np.nan)


def with_slo_rate(results: pd.DataFrame) -> pd.DataFrame:
    """Add ``slo_rps`` (lower of the TTFT and p99 rules' rates) and its band columns."""
    ttft, p99 = _f(results, "ttft_break_rps"), _f(results, "p99_break_rps")
    slo = np.fmin(ttft, p99)  # fmin: one rule's rate where the other never fired
    pct = _f(results, "serving_band_pct") / 100
    out = results.copy()
    out["slo_rps"] = slo
    out["slo_rps_low"] = slo * (1 - pct)
    out["slo_rps_high"] = slo * (1 + pct)
    return out


def economics(results: pd.DataFrame, prices: pd.DataFrame, output_tokens: int) -> pd.DataFrame:
    """Results with each config's price, cost per million output tokens and tokens per joule.

    ``prices`` is :func:`prices_frame` of (at least) the devices in ``results``;
    ``output_tokens`` the request profile's output length the rates were found
    for. Adds the price columns, ``slo_rps`` (+ band), and for each rate in
    :data:`RATES` ``usd_per_mtok_<rate>`` and ``tokens_per_joule_<rate>``, each
    with ``_low`` and ``_high``. Row order and every input column are kept.
    """
    out = with_slo_rate(results).merge(prices, on="gpu", how="left", validate="many_to_one")
    usd, watts = _f(out, "usd_per_hour"), _f(out, "power_w")
    for name, column in RATES.items():
        rate, low, high = (_f(out, column + end) for end in ("", "_low", "_high"))
        out[f"usd_per_mtok_{name}"] = usd_per_mtok(usd, rate, output_tokens)
        out[f"usd_per_mtok_{name}_low"] = usd_per_mtok(usd, high, output_tokens)
        out[f"usd_per_mtok_{name}_high"] = usd_per_mtok(usd, low, output_tokens)
        out[f"tokens_per_joule_{name}"] = tokens_per_joule(rate, output_tokens, watts)
        out[f"tokens_per_joule_{name}_low"] = tokens_per_joule(low, output_tokens, watts)
        out[f"tokens_per_joule_{name}_high"] = tokens_per_joule(high, output_tokens, watts)
    return out
