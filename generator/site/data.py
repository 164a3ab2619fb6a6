"""The sweep's tables as the site build reads them: curves only where needed.

An incremental build reads every row and every config's curves to key the
pages, but renders few: so the curves stay text until a page is rendered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from backpressure.generator import manifest
from backpressure.generator.records import Curves, ResultRow
from backpressure.generator.results_io import (
    CURVES,
    RESULTS,
    line_config_id,
    parse_curves,
    read_results,
)
from backpressure.generator.site.publish.assemble import SiteError


def read_sweep(results_dir: Path) -> tuple[list[ResultRow], CurveLines]:
    """The rows and curves of a sweep, checked as one unit against its manifest.

    A missing, damaged or changed file (or an interrupted sweep) is a SiteError:
    nothing is published from it.
    """
    try:
        files = manifest.read(results_dir, (RESULTS, CURVES))
    except manifest.Damaged as exc:
        raise SiteError(f"{exc}; sweep again (backpressure sweep or build)") from None
    # The bytes just checked are the bytes read (read_results reads the file again:
    # it must still be them).
    rows = read_rows(results_dir)
    if (results_dir / RESULTS).read_bytes() != files[RESULTS]:
        raise SiteError(f"{results_dir}/{RESULTS} changed while it was read")
    return rows, _curve_lines(files[CURVES].decode("utf-8"), results_dir)


def read_rows(results_dir: Path) -> list[ResultRow]:
    """The rows of ``results.csv``, in file order; a table of other columns is a SiteError."""
    try:
        return read_results(results_dir)
    except (ValueError, TypeError) as exc:
        raise SiteError(f"{results_dir}/{RESULTS}: {exc}") from exc


def read_curve_lines(results_dir: Path) -> CurveLines:
    """``curves.jsonl``, kept as text."""
    return _curve_lines((results_dir / CURVES).read_text(encoding="utf-8"), results_dir)


def _curve_lines(text: str, results_dir: Path) -> CurveLines:
    try:
        return CurveLines(text)
    except (ValueError, KeyError, TypeError) as exc:
        raise SiteError(f"{results_dir}/{CURVES}: not curves as the sweep writes them") from exc


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
        line = self.lines[cid]
        try:
            return parse_curves(line)
        except (ValueError, TypeError) as exc:
            raise SiteError(f"{CURVES}: the curves of {cid} cannot be read") from exc

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)
