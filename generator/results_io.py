"""Read and write the sweep's tables canonically: sorted rows, full-repr floats.

``results.csv`` holds one :class:`ResultRow` per config; ``curves.jsonl`` one
:class:`Curves` object per line. Both are sorted by config id, so two sweeps of
the same catalog give byte-identical files.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from generator.records import Curves, ResultRow

RESULTS = "results.csv"
CURVES = "curves.jsonl"
FIELDS = [f.name for f in dataclasses.fields(ResultRow)]
_HINTS = typing.get_type_hints(ResultRow)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _base_type(hint: Any) -> Any:
    if isinstance(hint, types.UnionType):
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def _parse(name: str, text: str) -> Any:
    hint = _HINTS[name]
    if text == "" and isinstance(hint, types.UnionType):
        return None
    base = _base_type(hint)
    if base is bool:
        return text == "true"
    if base is int:
        return int(text)
    if base is float:
        return float(text)
    return text


def results_csv(rows: Iterable[ResultRow]) -> str:
    """The results table as canonical CSV text."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(FIELDS)
    for row in sorted(rows, key=lambda r: r.config_id):
        writer.writerow([_cell(getattr(row, f)) for f in FIELDS])
    return buf.getvalue()


def curves_jsonl(curves: Iterable[Curves]) -> str:
    """The curves as canonical JSON lines."""
    lines = [
        json.dumps(dataclasses.asdict(c), sort_keys=True, separators=(",", ":"))
        for c in sorted(curves, key=lambda c: c.config_id)
    ]
    return "".join(line + "\n" for line in lines)


def read_results(out_dir: Path) -> list[ResultRow]:
    """Rows of ``results.csv`` in config-id order."""
    with (out_dir / RESULTS).open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return [ResultRow(**{k: _parse(k, v) for k, v in rec.items()}) for rec in reader]


def read_curves(out_dir: Path) -> dict[str, Curves]:
    """Curves by config id."""
    out: dict[str, Curves] = {}
    with (out_dir / CURVES).open(encoding="utf-8") as fh:
        for line in fh:
            data = json.loads(line)
            tuples = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
            out[data["config_id"]] = Curves(**tuples)
    return out


def row_json(row: ResultRow) -> dict[str, Any]:
    """A results row as the flat JSON object published per config."""
    return dataclasses.asdict(row)
