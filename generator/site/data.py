"""The sweep's tables as the site build reads them: curves only where needed.

An incremental build reads every row and every config's curves to key the
pages, but renders few: so the curves stay text until a page is rendered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from backpressure.generator.records import Curves, ResultRow
from backpressure.generator.results_io import CURVES, line_config_id, parse_curves, read_results
from backpressure.generator.site.publish.assemble import SiteError


def read_rows(results_dir: Path) -> list[ResultRow]:
    """The rows of ``results.csv``, in file order; a table of other columns is a SiteError."""
    try:
        return read_results(results_dir)
    except ValueError as exc:
        raise SiteError(str(exc)) from exc


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
                self.lines[line_config_id(line)] = line

    def __getitem__(self, cid: str) -> Curves:
        return parse_curves(self.lines[cid])

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)
