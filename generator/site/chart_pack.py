"""Chart datasets as a page ships them: column by column (``bp.js`` unpacks them)."""

from __future__ import annotations

import math
from typing import Any


def pack(charts: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """Every chart's datasets column by column, as a page ships them (``bp.js`` unpacks).

    A dataset, rows of one shape, becomes ``{"n": rows, "c": {field: column}}``:
    a numeric column is a list, or ``{"cycle": part}`` when it repeats ``part``
    (the x values every series shares), or ``{"seq": [start, step, period]}``
    when it counts up evenly (row ``j`` holds ``start + (j % period) * step``:
    a timeline's seconds); a text column is ``{"runs": [[value, run length],
    ...]}`` (a series name repeats for dozens of rows). Whole numbers are
    written without a fraction (``0``, not ``0.0``). A page carries about a
    fifth of the bytes of the rows themselves.
    """
    return {
        kind: {name: _pack_rows(rows) for name, rows in sets.items()}
        for kind, sets in charts.items()
    }


def _pack_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = list(rows[0]) if rows else []
    if any(list(r) != keys for r in rows):
        raise ValueError(f"rows of one dataset differ in their fields: {keys}")
    columns: dict[str, Any] = {}
    texts = [k for k in keys if all(isinstance(r[k], str) for r in rows)]
    for key in texts:
        runs: list[list[Any]] = []
        for r in rows:
            if runs and runs[-1][0] == r[key]:
                runs[-1][1] += 1
            else:
                runs.append([r[key], 1])
        columns[key] = {"runs": runs}
    # A numeric column may repeat once per series: try the series counts.
    counts = sorted({len(columns[k]["runs"]) for k in texts if len(columns[k]["runs"]) > 1})
    for key in keys:
        if key not in columns:
            column = _cycled([_whole(r[key]) for r in rows], counts)
            part = column["cycle"] if isinstance(column, dict) else column
            columns[key] = _seq(part) or column
    return {"n": len(rows), "c": columns}


def _whole(x: Any) -> Any:
    """A float with no fraction as an int: ``0`` is two bytes shorter than ``0.0``.

    JSON has one number type, so the browser reads the same value either way.
    """
    if type(x) is float and x.is_integer() and abs(x) < 2**53:
        return int(x)
    return x


SEQ_MIN = 8  # shorter columns stay lists: the encoding saves nothing there


def _seq(part: list[Any]) -> dict[str, list[Any]] | None:
    """``{"seq": [start, step, len(part)]}`` when ``part`` counts up evenly, exactly.

    Exactly means in the browser's arithmetic too: every value is checked as
    ``start + k * step`` computed in IEEE doubles, which is what JavaScript does.
    """
    if len(part) < SEQ_MIN or not all(_number(v) for v in part):
        return None
    start, step = part[0], part[1] - part[0]
    if not all(float(v) == float(start) + k * float(step) for k, v in enumerate(part)):
        return None
    return {"seq": [start, step, len(part)]}


def _number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _cycled(values: list[Any], counts: list[int]) -> Any:
    """``{"cycle": part}`` when the column is ``part`` repeated ``count`` times."""
    n = len(values)
    for times in counts:
        if n % times == 0 and values == values[: n // times] * times:
            return {"cycle": values[: n // times]}
    return values


def unpack(packed: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one packed dataset: what ``bp.js`` rebuilds in the browser."""
    rows: list[dict[str, Any]] = [{} for _ in range(packed["n"])]
    for key, column in packed["c"].items():
        if isinstance(column, list):
            values = column
        elif "cycle" in column:
            values = column["cycle"] * (packed["n"] // len(column["cycle"]))
        elif "seq" in column:
            start, step, period = column["seq"]
            values = [start + (j % period) * step for j in range(packed["n"])]
        else:
            values = [v for v, n in column["runs"] for _ in range(n)]
        for row, v in zip(rows, values, strict=True):
            row[key] = v
    return rows
