"""results.csv and curves.jsonl as typed DataFrames, equal however they are read."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from backpressure.generator.plan.frame import (
    DTYPES,
    TABLE_COLUMNS,
    concurrency_frame,
    read_sweep,
    results_frame,
    results_frame_from_csv,
)
from backpressure.generator.records import ResultRow
from backpressure.generator.results_io import (
    CURVES,
    RESULTS,
    read_curves,
    read_results,
    results_csv,
)

from tests.generator.plan.conftest import MODEL


def test_frame_from_the_file_equals_the_frame_from_the_rows(small):
    rows = read_results(small.sweep)
    from_rows = results_frame(rows)
    from_file = results_frame_from_csv((small.sweep / RESULTS).read_text(encoding="utf-8"))
    pd.testing.assert_frame_equal(from_rows, from_file)
    assert {c: str(t) for c, t in from_file.dtypes.items()} == DTYPES


def test_every_value_survives_the_frame(small):
    rows = read_results(small.sweep)
    frame = results_frame(reversed(rows))  # sorted by id whatever the input order
    assert list(frame["config_id"]) == sorted(r.config_id for r in rows)
    by_id = frame.set_index("config_id")
    for row in rows:
        for f in dataclasses.fields(ResultRow):
            want = getattr(row, f.name)
            got = by_id.at[row.config_id, f.name] if f.name != "config_id" else row.config_id
            if want is None:
                assert pd.isna(got), (row.config_id, f.name)
            elif isinstance(want, float):
                assert got == want or (math.isnan(want) and math.isnan(got))  # bit for bit
            else:
                assert got == want, (row.config_id, f.name)


def test_dtypes_follow_the_row_annotations():
    assert DTYPES["slots"] == "int64"
    assert DTYPES["max_concurrency"] == "Int64"
    assert DTYPES["breaking_rps_low"] == "float64"
    assert DTYPES["fits"] == "bool"
    assert DTYPES["usable"] == "boolean"
    assert DTYPES["breaking_rule"] == "string"
    assert set(DTYPES) == {f.name for f in dataclasses.fields(ResultRow)}


def test_an_empty_table_keeps_its_columns_and_types():
    frame = results_frame_from_csv(results_csv([]))
    assert frame.empty
    assert {c: str(t) for c, t in frame.dtypes.items()} == DTYPES


def test_other_columns_are_refused(small):
    text = (small.sweep / RESULTS).read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="other columns"):
        results_frame_from_csv(text.replace("config_id,", "id,", 1))


def test_the_concurrency_table_is_long_and_complete(small):
    curves = read_curves(small.sweep)
    table = concurrency_frame(curves.values())
    assert tuple(table.columns) == TABLE_COLUMNS
    assert {"users", "tpot_ms", "requests_per_s", "tokens_per_user"} <= set(table.columns)
    for cid, c in curves.items():
        part = table[table["config_id"] == cid]
        assert tuple(part["users"]) == c.users
        assert tuple(part["tpot_ms"]) == c.table_tpot_ms
        assert tuple(part["requests_per_s"]) == c.table_requests_per_s


def test_read_sweep_keeps_the_model_and_device_asked_for(small):
    everything = read_sweep(small.sweep)
    assert set(everything.results["model"]) == set(small.cat.models)
    one = read_sweep(small.sweep, model=MODEL)
    assert set(one.results["model"]) == {MODEL}
    assert set(one.concurrency["config_id"]) <= set(one.results["config_id"])
    both = read_sweep(small.sweep, model="gemma-2-9b", device="h100-sxm")
    assert both.results.empty  # gemma is swept on the RTX 4090 only
    assert set(read_sweep(small.sweep, model="gemma-2-9b").results["gpu"]) == {"rtx-4090"}
    assert everything.inputs == {}  # the fixture writes no inputs.json


def test_read_sweep_needs_both_tables(tmp_path, small):
    (tmp_path / RESULTS).write_text((small.sweep / RESULTS).read_text(encoding="utf-8"))
    with pytest.raises(FileNotFoundError):
        read_sweep(tmp_path)
    (tmp_path / CURVES).write_text("")
    assert read_sweep(tmp_path).concurrency.empty
