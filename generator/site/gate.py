"""The last gate before anything is published: every number finite and within its range.

A NaN that slipped through the engine would print as "nan ms" on a page and
make the chart JSON invalid; a negative rate is nonsense that looks like data.
So the build checks every numeric field of every row, every number of every
chart dataset and page data block, and fails (naming the config and the field)
before the workspace is swapped in: the old site stays.

Ranges are keyed by field name, so a field the sweep adds later is checked
too: every number must be finite, and a rate, count, size, duration or share
(by its name's ending) must not be negative. :data:`RANGES` holds the
exceptions and the tighter bounds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator
from typing import Any

from backpressure.generator.records import ResultRow
from backpressure.generator.site.publish.assemble import SiteError

INF = math.inf
# Field name -> (low, high), both inclusive. Fields not listed get the default below.
RANGES: dict[str, tuple[float, float]] = {
    "kv_budget_bytes": (-INF, INF),  # negative when the weights alone do not fit
    "error_band_pct": (0, 100),
    "gpu_count": (1, 4096),
    "context": (1, INF),
}
# A name ending so is a rate, count, size, duration or share: never negative.
NON_NEGATIVE_ENDINGS = (
    "_rps",
    "_rps_low",
    "_rps_high",
    "_per_s",
    "_bytes",
    "_tokens",
    "_params",
    "_s",
    "_ms",
    "_pct",
    "_share",
    "_count",
    "slots",
    "_concurrency",
)
# Chart dataset columns (generator/site/charts.py) that are rates, times or shares.
NON_NEGATIVE_NAMES = frozenset({"rps", "rps_served", "ms", "share", "t", "lo", "hi", "slots"})


def bounds(name: str) -> tuple[float, float]:
    """(low, high) of a field: its entry in RANGES, else [0, inf] for rates and counts."""
    if name in RANGES:
        return RANGES[name]
    if name in NON_NEGATIVE_NAMES or name.endswith(NON_NEGATIVE_ENDINGS):
        return (0, INF)
    return (-INF, INF)


def problem(name: str, value: Any) -> str | None:
    """Why ``value`` may not be published as field ``name``, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):
        return f"field {name} is {value!r} (must be a finite number)"
    low, high = bounds(name)
    if not low <= value <= high:
        return f"field {name} is {value!r} (must be between {low:g} and {high:g})"
    return None


def check_rows(rows: Iterable[ResultRow]) -> None:
    """Every numeric field of every row; SiteError naming the first bad config and field."""
    names = [f.name for f in dataclasses.fields(ResultRow)]
    for row in rows:
        for name in names:
            found = problem(name, getattr(row, name))
            if found:
                raise SiteError(f"config {row.config_id}: {found}; nothing was published")


def _numbers(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _numbers(value, str(key) if not path else f"{path}.{key}")
    elif isinstance(obj, list | tuple):
        for item in obj:
            yield from _numbers(item, path)
    else:
        yield path, obj


def check_data(what: str, data: Any) -> None:
    """Every number in a chart dataset or page data block (nested dicts and lists)."""
    for path, value in _numbers(data, ""):
        found = problem(path.rpartition(".")[2], value)
        if found:
            raise SiteError(f"{what}: {path}: {found}; nothing was published")
