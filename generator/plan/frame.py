"""The sweep's tables as pandas DataFrames with typed columns.

``results.csv`` stays the canonical artifact (written by
:mod:`backpressure.generator.results_io`, never here); this module only reads
it. Column types follow the :class:`~backpressure.generator.records.ResultRow`
annotations, so a field added to the row is typed here without an edit:

==================  =============  =====================================
annotation          dtype          empty cell
==================  =============  =====================================
``int``             ``int64``      (never empty)
``int | None``      ``Int64``      ``pd.NA``
``float``           ``float64``    (never empty)
``float | None``    ``float64``    ``NaN``
``bool``            ``bool``       (never empty)
``bool | None``     ``boolean``    ``pd.NA``
``str``             ``string``     (never empty)
``str | None``      ``string``     ``pd.NA``
==================  =============  =====================================

Floats are parsed with Python's ``float`` (the CSV holds full-repr floats), so a
frame read from the file equals one built from the rows, bit for bit.

The concurrency table (``curves.jsonl``'s ``users`` and ``table_*`` series) is
one long frame: a row per config and closed-loop point, columns named after
the series without their ``table_`` prefix.

:func:`read_sweep` is the one function in :mod:`backpressure.generator.plan`
that touches the file system.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from backpressure.generator.records import SEP, Curves, ResultRow
from backpressure.generator.results_io import CURVES, FIELDS, RESULTS, line_config_id, parse_curves

INPUTS = "inputs.json"  # the sweep's cache keys, by config id (generator/sweep/run.py)
TABLE_PREFIX = "table_"
TABLE_COLUMNS = (
    "config_id",
    "users",
    *(
        f.name.removeprefix(TABLE_PREFIX)
        for f in dataclasses.fields(Curves)
        if f.name.startswith(TABLE_PREFIX)
    ),
)

_HINTS = typing.get_type_hints(ResultRow)


def _dtype(hint: Any) -> tuple[str, type, bool]:
    """The pandas dtype, the Python base type and whether the column may be empty."""
    optional = isinstance(hint, types.UnionType)
    base = next(a for a in typing.get_args(hint) if a is not type(None)) if optional else hint
    plain = {int: "int64", float: "float64", bool: "bool", str: "string"}
    nullable = {int: "Int64", float: "float64", bool: "boolean", str: "string"}
    return (nullable if optional else plain)[base], base, optional


DTYPES: dict[str, str] = {name: _dtype(_HINTS[name])[0] for name in FIELDS}


def _parser(name: str) -> Callable[[str], Any]:
    """Text of one cell to its value, as results_io writes it ('' is None)."""
    _, base, optional = _dtype(_HINTS[name])
    table: dict[type, Callable[[str], Any]] = {bool: "true".__eq__, int: int, float: float}
    conv = table.get(base, str)
    if not optional:
        return conv
    return lambda text: None if text == "" else conv(text)


def _typed(columns: dict[str, list[Any]]) -> pd.DataFrame:
    """A frame of ``FIELDS`` columns, each as its :data:`DTYPES` entry, rows by config id."""
    frame = pd.DataFrame({name: pd.Series(columns[name], dtype=DTYPES[name]) for name in FIELDS})
    return frame.sort_values("config_id", kind="stable").reset_index(drop=True)


def results_frame(rows: Iterable[ResultRow]) -> pd.DataFrame:
    """Result rows as a typed frame, sorted by config id (one row per config)."""
    rows = list(rows)
    return _typed({name: [getattr(r, name) for r in rows] for name in FIELDS})


def results_frame_from_csv(text: str, keep: Callable[[str], bool] | None = None) -> pd.DataFrame:
    """``results.csv`` text as a typed frame; equal to :func:`results_frame` of its rows.

    ``keep`` selects rows by config id (default: all). Raises ``ValueError`` when
    the header is not the one this version writes.
    """
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None:
        return _typed({name: [] for name in FIELDS})
    if header != FIELDS:
        raise ValueError(f"{RESULTS}: other columns than this version writes")
    records = [rec for rec in reader if keep is None or keep(rec[0])]
    cells = list(zip(*records, strict=True)) or [() for _ in FIELDS]
    parsers = [_parser(name) for name in FIELDS]
    return _typed(
        {name: [p(v) for v in col] for name, p, col in zip(FIELDS, parsers, cells, strict=True)}
    )


def concurrency_frame(curves: Iterable[Curves]) -> pd.DataFrame:
    """The closed-loop tables of ``curves`` in long form, by config id then users."""
    names = TABLE_COLUMNS[2:]
    data: dict[str, list[Any]] = {c: [] for c in TABLE_COLUMNS}
    for c in sorted(curves, key=lambda c: c.config_id):
        data["config_id"].extend([c.config_id] * len(c.users))
        data["users"].extend(c.users)
        for name in names:
            data[name].extend(getattr(c, TABLE_PREFIX + name))
    frame = pd.DataFrame(
        {
            "config_id": pd.Series(data["config_id"], dtype="string"),
            "users": pd.Series(data["users"], dtype="int64"),
            **{n: pd.Series(data[n], dtype="float64") for n in names},
        }
    )
    return frame.sort_values(["config_id", "users"], kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class Sweep:
    """A sweep output read for planning: results, concurrency tables and cache keys."""

    results: pd.DataFrame
    concurrency: pd.DataFrame
    inputs: dict[str, str]


def _wanted(model: str | None, device: str | None) -> Callable[[str], bool]:
    """Whether a config id names the model and the device asked for (None: any)."""

    def keep(cid: str) -> bool:
        parts = cid.split(SEP)
        return (device is None or parts[0] == device) and (model is None or parts[1] == model)

    return keep


def read_sweep(sweep_dir: Path, *, model: str | None = None, device: str | None = None) -> Sweep:
    """Read ``results.csv``, ``curves.jsonl`` and ``inputs.json`` of a sweep output.

    Only configs of ``model`` and ``device`` are kept (both None: every config);
    curves lines of other configs are skipped without being parsed. A missing
    ``inputs.json`` reads as no keys. Raises ``OSError`` for a missing table and
    ``ValueError`` for one this version did not write.
    """
    keep = _wanted(model, device)
    results = results_frame_from_csv((sweep_dir / RESULTS).read_text(encoding="utf-8"), keep)
    with (sweep_dir / CURVES).open(encoding="utf-8") as fh:
        curves = [parse_curves(line) for line in fh if keep(line_config_id(line))]
    try:
        inputs = json.loads((sweep_dir / INPUTS).read_text(encoding="utf-8"))
    except FileNotFoundError:
        inputs = {}
    return Sweep(results, concurrency_frame(curves), {str(k): str(v) for k, v in inputs.items()})
