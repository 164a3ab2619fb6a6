"""Prices in the catalog: every figure carries its source and the date it held.

A price is a fact about a moment, so each one records ``as_of``: the date the
source states for it (a price list's snapshot, an article's publication date).
Dates are ISO ``YYYY-MM-DD``; a month alone or a number is refused, because a
YAML integer such as ``20251116`` would otherwise be read as seconds since 1970.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

Source = Annotated[str, StringConstraints(min_length=4, max_length=500)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=160)]
Note = Annotated[str, StringConstraints(max_length=1000)]

# No catalog price predates this; an earlier date is a typo.
EARLIEST_DATE = dt.date(2000, 1, 1)
MAX_USD_PER_GPU_HOUR = 1_000.0
MAX_PURCHASE_USD = 10_000_000.0
MAX_USD_PER_KWH = 10.0

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _iso_date(value: object) -> dt.date:
    """Accept a date or an ISO ``YYYY-MM-DD`` string, nothing else."""
    if isinstance(value, dt.datetime):
        raise ValueError("expected a date (YYYY-MM-DD) without a time")
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and _ISO_DATE.fullmatch(value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(f"not a calendar date: {value}") from exc
    raise ValueError("expected a date as YYYY-MM-DD")


AsOf = Annotated[dt.date, BeforeValidator(_iso_date), Field(ge=EARLIEST_DATE)]


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Quote(_Fact):
    default: bool
    default_reason: str | None

    @model_validator(mode="after")
    def _default_says_why(self) -> _Quote:
        if self.default and not self.default_reason:
            raise ValueError("default_reason: the default quote must say why it is the default")
        if not self.default and self.default_reason:
            raise ValueError("default_reason: only the default quote carries one")
        return self


class RentalPrice(_Quote):
    """One on-demand rental price for one GPU, as a provider or tracker lists it."""

    provider: Label = Field(description="Who rents it out (or which tracker aggregates offers).")
    usd_per_gpu_hour: float = Field(
        gt=0, le=MAX_USD_PER_GPU_HOUR, description="Price per GPU per hour [USD/h]."
    )
    as_of: AsOf = Field(description="Date the source gives for the price (YYYY-MM-DD).")
    source: Source = Field(description="URL or document that states the price.")
    offer: Label | None = Field(
        default=None,
        description="Instance, shape or statistic priced (e.g. 'p5.48xlarge, 8 GPUs / 8').",
    )
    default: bool = Field(
        default=False, description="The figure the cost pages use; exactly one per device."
    )
    default_reason: Note | None = Field(
        default=None, description="Why this quote is the default (required on the default one)."
    )
    note: Note | None = Field(default=None, description="Caveats: spot offers mixed in, etc.")


class PurchasePrice(_Quote):
    """A price to buy the device (or the smallest machine built around it)."""

    usd: float = Field(gt=0, le=MAX_PURCHASE_USD, description="Price [USD].")
    kind: Literal["msrp", "list", "street"] = Field(
        description=(
            "msrp: the maker's suggested price at launch; list: a seller's catalog "
            "price for a configuration; street: what the device sells for."
        )
    )
    item: Label = Field(description="What exactly was priced (configuration, edition).")
    as_of: AsOf = Field(description="Date the source gives for the price (YYYY-MM-DD).")
    source: Source = Field(description="URL or document that states the price.")
    default: bool = Field(
        default=False, description="The figure the cost pages use; exactly one per device."
    )
    default_reason: Note | None = Field(
        default=None, description="Why this quote is the default (required on the default one)."
    )
    note: Note | None = Field(default=None, description="Caveats.")


class ElectricityPrice(_Fact):
    """The electricity price owner-run hardware is costed at."""

    usd_per_kwh: float = Field(gt=0, le=MAX_USD_PER_KWH, description="Price [USD/kWh].")
    region: Label = Field(description="Where the price applies.")
    sector: Literal["residential", "commercial", "industrial", "all"] = Field(
        description="Which customers pay it."
    )
    period: Label = Field(description="The period the average covers.")
    as_of: AsOf = Field(description="Release date of the figure (YYYY-MM-DD).")
    source: Source = Field(description="URL or document that states the price.")
    note: Note | None = Field(default=None, description="Caveats.")


def one_default(quotes: tuple[RentalPrice, ...] | tuple[PurchasePrice, ...], field: str) -> None:
    """Raise unless a non-empty list of quotes marks exactly one as the default."""
    marked = sum(q.default for q in quotes)
    if quotes and marked != 1:
        raise ValueError(f"{field}: mark exactly one quote 'default: true' (found {marked})")
