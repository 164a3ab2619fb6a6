"""api/models/<model>.json: fields, order, bytes, and costs as economics computes them."""

from __future__ import annotations

import json
import math

import pytest
from backpressure.generator.plan.economics import device_price
from backpressure.generator.site import model_api, model_json
from backpressure.generator.site.links import row_url

from tests.generator.fixtures import evaluated

REQUIRED = {
    "id",
    "url",
    "page",
    "model",
    "gpu",
    "gpu_name",
    "quant",
    "context",
    "fits",
    "usable",
    "fails_at_any_load",
    "breaking_rps",
    "breaking_rps_low",
    "breaking_rps_high",
    "breaking_rule",
    "saturation_rps",
    "slots",
    "binding_ceiling",
    "tokens_per_s_per_user",
    "usd_per_hour",
    "usd_per_million_output_tokens",
    "price_as_of",
}


@pytest.fixture(scope="module")
def sweep(cat):
    pairs = evaluated(cat=cat)
    return [r for r, _ in pairs], {c.config_id: c for _, c in pairs}


@pytest.fixture(scope="module")
def docs(cat, sweep):
    rows, curves = sweep
    return {path: json.loads(text) for path, text in files(cat, rows, curves).items()}


def files(cat, rows, curves, site_url=""):
    """Each model's file as the site writes it: site path -> text."""
    by_model = model_json.model_configs(cat, rows, curves, site_url)
    return {
        model_api.model_file(m): model_api.model_json(cat, m, configs)
        for m, configs in by_model.items()
    }


def test_one_file_per_model_with_every_config_and_field(cat, sweep, docs):
    rows, _ = sweep
    assert set(docs) == {f"api/models/{r.model}.json" for r in rows}
    for doc in docs.values():
        assert set(doc) == {"model", "name", "configs"}
        assert doc["name"] == cat.models[doc["model"]].name
        ids = [c["id"] for c in doc["configs"]]
        assert ids == sorted(ids)
        assert ids == sorted(r.config_id for r in rows if r.model == doc["model"])
        for c in doc["configs"]:
            assert set(c) >= REQUIRED, REQUIRED - set(c)
    by_id = {r.config_id: r for r in rows}
    for doc in docs.values():
        for c in doc["configs"]:
            r = by_id[c["id"]]
            assert c["url"] == row_url(r)  # the page, or the anchored row when there is none
            assert (c["gpu"], c["quant"], c["context"], c["fits"]) == (
                r.gpu,
                r.quant,
                r.context,
                r.fits,
            )


def test_blanks_say_why(docs):
    configs = [c for d in docs.values() for c in d["configs"]]
    statuses = {c["status"] for c in configs}
    # The fixture holds configs that serve, fail at any load and do not fit.
    assert {"serves", "does-not-fit", "fails-at-any-load"} <= statuses
    for c in configs:
        if c["status"] == "serves":
            assert c["breaking_rps_low"] <= c["breaking_rps"] <= c["breaking_rps_high"]
        else:
            assert c["breaking_rps"] is None
        if c["usd_per_hour"] is None:
            assert c["unpriced_reason"]
        if c["status"] == "does-not-fit":
            assert c["shortfall_bytes"] > 0
            assert not c["fits"]


def test_cost_is_the_device_price_over_the_tokens_at_the_breaking_rate(cat, docs):
    out_tokens = cat.settings.output_tokens
    checked = 0
    for doc in docs.values():
        for c in doc["configs"]:
            price = device_price(cat, c["gpu"]) if c["gpu"] in {*cat.gpus, *cat.rigs} else None
            if price is None:
                assert c["usd_per_hour"] is None
                continue
            assert c["usd_per_hour"] == pytest.approx(price.usd_per_hour, rel=1e-5)
            assert c["price_as_of"] == price.as_of
            if c["breaking_rps"] is None:
                assert c["usd_per_million_output_tokens"] is None
                continue
            # $/h over tokens/h, by hand: 3600 s x rate x output tokens per request.
            tokens_per_hour = 3600 * c["breaking_rps"] * out_tokens
            assert c["usd_per_million_output_tokens"] == pytest.approx(
                price.usd_per_hour * 1e6 / tokens_per_hour, rel=1e-5
            )
            # The band: the cheap end comes from the rate's high end.
            low = price.usd_per_hour * 1e6 / (3600 * c["breaking_rps_high"] * out_tokens)
            assert c["usd_per_million_output_tokens_low"] == pytest.approx(low, rel=1e-5)
            checked += 1
    assert checked >= 3


def test_tokens_per_user_is_the_closed_loop_point_carrying_the_breaking_rate(sweep, docs):
    _, curves = sweep
    checked = 0
    for doc in docs.values():
        for c in doc["configs"]:
            if c["breaking_rps"] is None:
                assert c["tokens_per_s_per_user"] is None
                continue
            cv = curves[c["id"]]
            # The first row (fewest users) whose throughput so far reaches the rate, else the last.
            best, pick = -math.inf, len(cv.users) - 1
            for i, rps in enumerate(cv.table_requests_per_s):
                best = max(best, rps)
                if best >= c["breaking_rps"] * (1 - 1e-6):
                    pick = i
                    break
            assert c["tokens_per_s_per_user"] == pytest.approx(
                cv.table_tokens_per_user[pick], rel=1e-5
            )
            checked += 1
    assert checked >= 3


def test_canonical_bytes(cat, sweep):
    rows, curves = sweep
    a = files(cat, rows, curves)
    b = files(cat, list(reversed(rows)), curves)
    assert a == b  # row order does not matter
    for text in a.values():
        doc = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
        compact = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert text.replace("\n", "") == compact
        assert text.endswith("}\n")
        assert text.count("\n") == len(doc["configs"]) + 2  # a line per config


def test_site_url_makes_urls_absolute(cat, sweep):
    rows, curves = sweep
    by_model = model_json.model_configs(cat, rows, curves, "https://example.org")
    url = by_model[rows[0].model][0]["url"]
    assert url.startswith("https://example.org/gpu/")
