"""A run table copied onto another GPU's page is left out, not replayed twice."""

from __future__ import annotations

import csv
from pathlib import Path

from backpressure.generator.accuracy.rows import DATA
from backpressure.generator.accuracy.serving import COPIED, copied_rows, load_cases

FIELDS = ("gpu", "hf_repo", "weights_dtype", "duration_s", "mean_ttft_ms", "mean_tpot_ms",
          "output_throughput")  # fmt: skip


def _table(tmp_path: Path, rows: list[tuple[str, ...]]) -> Path:
    path = tmp_path / "runs.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(FIELDS)
        w.writerows(rows)
    return path


def test_the_same_figures_on_two_gpus_flag_both(tmp_path: Path) -> None:
    path = _table(
        tmp_path,
        [
            ("A100", "m", "bf16", "21.03", "16583.77", "153.00", "190.21"),
            ("H100", "m", "bf16", "21.03", "16583.77", "153.00", "190.21"),
            ("H100", "m", "bf16", "12.00", "9000.00", "120.00", "300.00"),
        ],
    )
    assert copied_rows(path) == {0, 1}


def test_one_run_quoted_twice_for_its_own_setup_is_kept(tmp_path: Path) -> None:
    path = _table(
        tmp_path,
        [
            ("H100", "m", "bf16", "44.40", "64.00", "7.38", "496.88"),
            ("H100", "m", "bf16", "44.40", "64.00", "7.38", "496.88"),
            ("H100", "m", "bf16", "", "5172.78", "126.55", ""),  # too few figures to judge
            ("A100", "m", "bf16", "", "5172.78", "126.55", ""),
        ],
    )
    assert copied_rows(path) == frozenset()


def test_the_bundled_copies_are_counted_as_skipped() -> None:
    from backpressure.catalog.loader import load_catalog

    copies = copied_rows(DATA / "serving_load.csv")
    cases, skipped = load_cases(load_catalog())
    assert skipped[COPIED] == len(copies) > 0
    assert not {c.row for c in cases} & copies
