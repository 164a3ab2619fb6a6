"""Published measurement tables as cases: one reader for every table under benchmarks/data."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from backpressure.generator.paths import ROOT

DATA = ROOT / "benchmarks" / "data"

CaseT = TypeVar("CaseT")
CaseFn = Callable[[Mapping[str, Any], int, Mapping[str, str]], tuple[str, CaseT | None]]


def data_rows(name: str, data: Path = DATA) -> list[dict[str, str]]:
    """The CSV ``name`` under benchmarks/data as dicts, in file order."""
    with (data / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def read_cases(table: Path, mapping: Path, case: CaseFn[CaseT]) -> tuple[list[CaseT], Counter[str]]:
    """``case(mapping, index, row)`` for every row of the CSV ``table``.

    ``case`` returns why a row is not comparable (counted) or the case it makes;
    ``mapping`` is the YAML that names the table's GPUs, models and quants in
    the catalog's ids.
    """
    names = yaml.safe_load(mapping.read_text(encoding="utf-8"))
    rows = data_rows(table.name, table.parent)
    skipped: Counter[str] = Counter()
    cases = []
    for i, r in enumerate(rows):
        why, made = case(names, i, r)
        if made is None:
            skipped[why] += 1
        else:
            cases.append(made)
    return cases, skipped
