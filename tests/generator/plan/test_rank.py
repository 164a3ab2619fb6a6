"""Rankings per model, sortable keys, a device's best configs, the per-model JSON index."""

from __future__ import annotations

import itertools
import json
import math

import pandas as pd
import pytest
from backpressure.generator.plan.economics import economics, prices_frame
from backpressure.generator.plan.frame import read_sweep
from backpressure.generator.plan.rank import (
    INDEX_COLUMNS,
    SORT_KEYS,
    STATUSES,
    best_for_device,
    model_index,
    ranking,
    records,
    sort_frame,
    status,
    with_names,
)

from tests.generator.plan.conftest import MODEL


@pytest.fixture(scope="module")
def econ(small):
    sweep = read_sweep(small.sweep)
    prices = prices_frame(small.cat, sweep.results["gpu"])
    return economics(sweep.results, prices, small.cat.settings.output_tokens), sweep.concurrency


def test_status_names_why_a_rate_is_missing(econ):
    frame, _ = econ
    codes = dict(zip(frame["config_id"], status(frame), strict=True))
    assert codes["rtx-3060-12gb--llama-3.1-8b--bf16--8k"] == "does-not-fit"
    assert codes["m4-max-128gb--llama-3.1-8b--q4_k_m--8k"] == "fails-at-any-load"
    assert codes["rtx-4090--llama-3.1-8b--q4_k_m--8k"] == "serves"
    assert set(codes.values()) <= set(STATUSES)
    for cid, code in codes.items():
        has_rate = not math.isnan(frame.set_index("config_id").at[cid, "breaking_rps"])
        assert has_rate == (code == "serves"), cid


def test_a_ranking_holds_every_config_of_the_model_in_order(econ):
    frame, table = econ
    ranked = ranking(frame, MODEL, table)
    assert sorted(ranked["config_id"]) == sorted(frame[frame["model"] == MODEL]["config_id"])
    assert list(ranked["context"]) == sorted(ranked["context"])
    for _, part in ranked.groupby("context"):
        serving = part[part["status"] == "serves"]
        rest = part[part["status"] != "serves"]
        assert list(part["config_id"])[: len(serving)] == list(serving["config_id"])
        low = list(serving["breaking_rps_low"])
        assert low == sorted(low, reverse=True)
        assert rest["breaking_rps"].isna().all()
    served = ranked[ranked["status"] == "serves"]
    assert served["tokens_per_user_breaking"].notna().all()
    assert (served["users_at_breaking"] >= 1).all()


def test_tokens_per_user_at_the_breaking_rate_come_from_the_table(econ):
    frame, table = econ
    ranked = ranking(frame, MODEL, table)
    row = ranked[ranked["config_id"] == "rtx-4090--llama-3.1-8b--q4_k_m--8k"].iloc[0]
    t = table[table["config_id"] == row["config_id"]].sort_values("users")
    reach = t["requests_per_s"].cummax()
    hit = t[reach >= row["breaking_rps"]]
    first = hit.iloc[0] if len(hit) else t.iloc[-1]
    assert row["users_at_breaking"] == first["users"]
    assert row["tokens_per_user_breaking"] == first["tokens_per_user"]


@pytest.mark.parametrize("key", sorted(SORT_KEYS))
def test_every_sort_key_orders_with_nan_last_and_ties_by_id(econ, key):
    frame, table = econ
    ranked = ranking(frame, MODEL, table)
    column, ascending = SORT_KEYS[key]
    out = sort_frame(ranked.sample(frac=1.0, random_state=3), [key])
    values = out[column]
    present = values.notna()
    assert list(present) == sorted(present, reverse=True)  # NaN last
    kept = out[present]
    pairs = list(zip(kept[column], kept["config_id"], strict=True))
    for (a, ida), (b, idb) in itertools.pairwise(pairs):
        assert (a < b if ascending else a > b) or (a == b and ida < idb)


def test_a_device_best_configs_one_per_model_and_context(econ):
    frame, _ = econ
    best = best_for_device(frame, "rtx-4090")
    mine = frame[(frame["gpu"] == "rtx-4090") & frame["breaking_rps"].notna()]
    pairs = sorted(set(zip(mine["model"], mine["context"], strict=True)))
    assert list(zip(best["model"], best["context"], strict=True)) == pairs
    for _, row in best.iterrows():
        pool = mine[(mine["model"] == row["model"]) & (mine["context"] == row["context"])]
        assert row["breaking_rps_low"] == pool["breaking_rps_low"].max()
    only = best_for_device(frame, "rtx-4090", [8192])
    assert set(only["context"]) == {8192}
    assert len(only) == len({m for m, c in pairs if c == 8192})
    assert best_for_device(frame, "m4-max-128gb").empty


def test_names_come_from_the_catalog(small, econ):
    frame, _ = econ
    named = with_names(frame, small.cat)
    row = named[named["gpu"] == "2x-rtx-4090"].iloc[0]
    assert row["device_name"] == small.cat.rigs["2x-rtx-4090"].name
    assert row["model_name"] == small.cat.models[MODEL].name
    assert named["quant_name"].notna().all()


def test_the_model_index_is_small_plain_json(econ):
    frame, table = econ
    index = model_index(ranking(frame, MODEL, table))
    assert len(index) == int((frame["model"] == MODEL).sum())
    assert set(index[0]) == set(INDEX_COLUMNS)
    text = json.dumps(index, allow_nan=False, sort_keys=True)  # no NaN, no numpy types
    assert json.loads(text) == index
    assert all(r["status"] != "serves" or r["breaking_rps"] is not None for r in index)


def test_records_round_to_six_digits_and_keep_missing_as_none():
    frame = pd.DataFrame(
        {
            "a": [1.0 / 3, float("nan")],
            "b": pd.array([1, pd.NA], dtype="Int64"),
            "c": pd.array(["x", pd.NA], dtype="string"),
            "d": [float("inf"), 2.0],
        }
    )
    assert records(frame) == [
        {"a": 0.333333, "b": 1, "c": "x", "d": float("inf")},
        {"a": None, "b": None, "c": None, "d": 2.0},
    ]
