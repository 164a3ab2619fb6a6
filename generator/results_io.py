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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from backpressure.generator.records import Curves, ResultRow

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


def _converter(name: str) -> Callable[[str], Any]:
    """Text to value for one column, as :func:`_cell` writes it (worked out once per column)."""
    hint = _HINTS[name]
    optional = isinstance(hint, types.UnionType)
    base = next(a for a in typing.get_args(hint) if a is not type(None)) if optional else hint
    table: dict[Any, Callable[[str], Any]] = {bool: "true".__eq__, int: int, float: float}
    conv = table.get(base, str)
    if not optional:
        return conv
    return lambda text: None if text == "" else conv(text)


_CONVERTERS = [_converter(name) for name in FIELDS]
CURVES_HEAD = '{"config_id":"'  # every canonical curves line starts so (sorted keys)
# (a Curves field sorting before config_id would break this; a test checks the order)
_CURVE_FIELDS = tuple(f.name for f in dataclasses.fields(Curves))


class _LineWriter:
    """One CSV line at a time through one reused writer (a writer per row cost more)."""

    def __init__(self) -> None:
        self.buf = io.StringIO()
        self.writer = csv.writer(self.buf, lineterminator="\n")

    def line(self, cells: list[str]) -> str:
        self.buf.seek(0)
        self.buf.truncate()
        self.writer.writerow(cells)
        return self.buf.getvalue()


_LINES = _LineWriter()


def csv_line(cells: list[str]) -> str:
    """``cells`` as one line of CSV, as :func:`results_csv` writes a row."""
    return _LINES.line(cells)


def results_line(row: ResultRow) -> str:
    """A row's line of :func:`results_csv` (its text after the header, for one row)."""
    return _LINES.line([_cell(getattr(row, f)) for f in FIELDS])


def results_csv(rows: Iterable[ResultRow]) -> str:
    """The results table as canonical CSV text: the header, then each row's line by id."""
    ordered = sorted(rows, key=lambda r: r.config_id)
    return csv_line(list(FIELDS)) + "".join(results_line(r) for r in ordered)


def curves_line(c: Curves) -> str:
    """A config's canonical ``curves.jsonl`` line.

    Built from a shallow dict of the fields: the same JSON as from
    ``dataclasses.asdict``, which copies every number one call at a time and
    took half a minute over the catalog.
    """
    fields = {name: getattr(c, name) for name in _CURVE_FIELDS}
    return json.dumps(fields, sort_keys=True, separators=(",", ":")) + "\n"


def curves_head(config_id: str) -> str:
    """The start of a config's :func:`curves_line`: its id (the first key) and a comma."""
    return '{"config_id":' + json.dumps(config_id) + ","


def curves_jsonl(curves: Iterable[Curves]) -> str:
    """The curves as canonical JSON lines."""
    return "".join(curves_line(c) for c in sorted(curves, key=lambda c: c.config_id))


def read_results(out_dir: Path) -> list[ResultRow]:
    """Rows of ``results.csv`` in file (config-id) order.

    Raises ``ValueError`` when the header is not the one this version writes.
    """
    path = out_dir / RESULTS
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            return []
        if header != FIELDS:
            raise ValueError(f"{path}: other columns than this version writes")
        return [ResultRow(*[c(v) for c, v in zip(_CONVERTERS, rec, strict=True)]) for rec in reader]


def line_config_id(line: str) -> str:
    """The config id of a ``curves.jsonl`` line, without parsing the rest of it.

    Canonical lines have sorted keys, so ``config_id`` comes first; a quote or a
    backslash in the id would need unescaping, so that case parses the line.
    """
    if line.startswith(CURVES_HEAD):
        end = line.find('"', len(CURVES_HEAD))
        cid = line[len(CURVES_HEAD) : end]
        if end > 0 and "\\" not in cid:
            return cid
    return str(json.loads(line)["config_id"])


def parse_curves(line: str) -> Curves:
    """One ``curves.jsonl`` line as :class:`Curves`."""
    data = json.loads(line)
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Curves(**fields)


def read_curves(out_dir: Path) -> dict[str, Curves]:
    """Curves by config id."""
    with (out_dir / CURVES).open(encoding="utf-8") as fh:
        curves = [parse_curves(line) for line in fh]
    return {c.config_id: c for c in curves}


def row_json(row: ResultRow) -> dict[str, Any]:
    """A results row as the flat JSON object published per config."""
    return dataclasses.asdict(row)
