"""The sweep's tables as the site build reads them: fast, and curves only where needed.

An incremental build reads every row and every config's curves to key the
pages, but renders few: so rows are parsed with one converter per column,
worked out once (three times faster than ``results_io.read_results``, which it
must equal), and the curves stay text until a page is rendered.
"""

from __future__ import annotations

import csv
import json
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from generator.assemble import SiteError
from generator.records import Curves, ResultRow
from generator.results_io import CURVES, FIELDS, RESULTS

_HINTS = typing.get_type_hints(ResultRow)


def _converter(name: str) -> Callable[[str], Any]:
    """Text to value for one column, as ``results_io`` writes it."""
    hint = _HINTS[name]
    optional = isinstance(hint, types.UnionType)
    base = next(a for a in typing.get_args(hint) if a is not type(None)) if optional else hint
    table: dict[Any, Callable[[str], Any]] = {bool: "true".__eq__, int: int, float: float}
    conv = table.get(base, str)
    if not optional:
        return conv
    return lambda text: None if text == "" else conv(text)


def read_rows(results_dir: Path) -> list[ResultRow]:
    """The rows of ``results.csv``, in file order."""
    convs = [_converter(name) for name in FIELDS]
    with (results_dir / RESULTS).open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            return []
        if header != FIELDS:
            raise SiteError(f"{results_dir / RESULTS}: other columns than this version writes")
        return [ResultRow(*[c(v) for c, v in zip(convs, rec, strict=True)]) for rec in reader]


def read_curve_lines(results_dir: Path) -> CurveLines:
    """``curves.jsonl``, kept as text."""
    return CurveLines((results_dir / CURVES).read_text(encoding="utf-8"))


class CurveLines(Mapping[str, Curves]):
    """``curves.jsonl`` kept as text, one line per config, parsed only for the pages rendered.

    An incremental build needs every config's curves only to hash them; parsing
    all of them would cost more than the pages it re-renders.
    """

    def __init__(self, text: str) -> None:
        self.lines: dict[str, str] = {}
        for line in text.splitlines():
            if line.strip():
                self.lines[_config_id(line)] = line

    def __getitem__(self, cid: str) -> Curves:
        data: dict[str, Any] = json.loads(self.lines[cid])
        for k, v in data.items():
            if isinstance(v, list):
                data[k] = tuple(v)
        return Curves(**data)

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)


_ID_PREFIX = '{"config_id":"'


def _config_id(line: str) -> str:
    # Lines are written with sorted keys, so config_id comes first; a quote or a
    # backslash in the id would need unescaping, so that case takes the slow path.
    if line.startswith(_ID_PREFIX):
        end = line.find('"', len(_ID_PREFIX))
        cid = line[len(_ID_PREFIX) : end]
        if end > 0 and "\\" not in cid:
            return cid
    return str(json.loads(line)["config_id"])
