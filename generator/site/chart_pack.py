"""Chart datasets as a page ships them: column by column (``bp.js`` unpacks them)."""

from __future__ import annotations

from typing import Any


def pack(charts: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """Every chart's datasets column by column, as a page ships them (``bp.js`` unpacks).

    A dataset, rows of one shape, becomes ``{"n": rows, "c": {field: column}}``:
    a numeric column is a list, or ``{"cycle": part}`` when it repeats ``part``
    (the x values every series shares); a text column is ``{"runs": [[value,
    run length], ...]}`` (a series name repeats for dozens of rows). A page carries about a fifth of
    the bytes of the rows themselves.
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
            columns[key] = _cycled([r[key] for r in rows], counts)
    return {"n": len(rows), "c": columns}


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
        else:
            values = [v for v, n in column["runs"] for _ in range(n)]
        for row, v in zip(rows, values, strict=True):
            row[key] = v
    return rows
