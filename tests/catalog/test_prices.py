"""Prices and power in the catalog: every figure sourced, dated, and validated."""

from __future__ import annotations

import datetime as dt
import shutil

import pytest
import yaml
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.loader import DEFAULT_ROOT, load_catalog
from backpressure.catalog.prices import PurchasePrice, RentalPrice
from backpressure.catalog.schema import Gpu, Settings
from pydantic import ValidationError

RENTAL = {
    "provider": "Example Cloud",
    "usd_per_gpu_hour": 2.5,
    "as_of": "2025-11-16",
    "source": "https://example.org/prices",
}
PURCHASE = {
    "usd": 1999,
    "kind": "msrp",
    "item": "a card",
    "as_of": dt.date(2025, 1, 30),
    "source": "https://example.org/launch",
}


def gpu_data(**extra):
    data = yaml.safe_load((DEFAULT_ROOT / "gpus" / "rtx-4090.yaml").read_text())
    for key in ("rental_prices", "purchase_prices", "board_power_w", "board_power_kind"):
        data.pop(key, None)
    data["sources"].pop("board_power_w", None)
    data.update(extra)
    return data


def test_an_iso_string_and_a_yaml_date_both_read_as_dates():
    assert RentalPrice(**RENTAL).as_of == dt.date(2025, 11, 16)
    assert PurchasePrice(**PURCHASE).as_of == dt.date(2025, 1, 30)


@pytest.mark.parametrize(
    "bad",
    [
        "2025-13-01",  # no 13th month
        "2025-02-30",  # no such day
        "2025-11",  # a month is not a date
        "16/11/2025",
        "yesterday",
        20251116,  # would otherwise be read as seconds since 1970
        dt.datetime(2025, 11, 16, 12, 0),
        "1999-12-31",  # before any catalog price
    ],
)
def test_bad_dates_are_refused(bad):
    with pytest.raises(ValidationError, match="as_of"):
        RentalPrice(**{**RENTAL, "as_of": bad})


@pytest.mark.parametrize("price", [0, -1.5, 1e6])
def test_rental_prices_must_be_positive_and_plausible(price):
    with pytest.raises(ValidationError, match="usd_per_gpu_hour"):
        RentalPrice(**{**RENTAL, "usd_per_gpu_hour": price})


@pytest.mark.parametrize("usd", [0, -100])
def test_purchase_prices_must_be_positive(usd):
    with pytest.raises(ValidationError, match="usd"):
        PurchasePrice(**{**PURCHASE, "usd": usd})


def test_purchase_kind_is_one_of_three():
    with pytest.raises(ValidationError, match="kind"):
        PurchasePrice(**{**PURCHASE, "kind": "rumour"})


def test_a_price_needs_its_source():
    data = {k: v for k, v in RENTAL.items() if k != "source"}
    with pytest.raises(ValidationError, match="source"):
        RentalPrice(**data)


def test_the_default_quote_says_why_and_only_it_does():
    with pytest.raises(ValidationError, match="default_reason"):
        RentalPrice(**RENTAL, default=True)
    with pytest.raises(ValidationError, match="default_reason"):
        RentalPrice(**RENTAL, default_reason="cheapest")
    assert RentalPrice(**RENTAL, default=True, default_reason="cheapest").default


def test_quotes_mark_exactly_one_default():
    one = {**RENTAL, "default": True, "default_reason": "dated"}
    assert len(Gpu(**gpu_data(rental_prices=[one, RENTAL])).rental_prices) == 2
    with pytest.raises(ValidationError, match="exactly one"):
        Gpu(**gpu_data(rental_prices=[RENTAL, RENTAL]))
    chosen = {**PURCHASE, "default": True, "default_reason": "only one"}
    with pytest.raises(ValidationError, match="exactly one"):
        Gpu(**gpu_data(purchase_prices=[chosen, chosen]))


def test_board_power_needs_a_kind_and_a_source():
    sourced = gpu_data(board_power_w=450)
    sourced["sources"]["board_power_w"] = "https://example.org/power"
    with pytest.raises(ValidationError, match="board_power_kind"):
        Gpu(**sourced)
    with pytest.raises(ValidationError, match="board_power_w"):
        Gpu(**gpu_data(board_power_w=450, board_power_kind="board"))
    with pytest.raises(ValidationError, match="board_power_w"):
        Gpu(**gpu_data(board_power_w=-5, board_power_kind="board"))


def test_the_electricity_price_is_a_dated_sourced_setting():
    s = Settings()
    assert s.electricity.usd_per_kwh > 0
    assert s.electricity.as_of.year >= 2024
    assert s.electricity.source.startswith("https://www.eia.gov/")
    assert s.amortisation_years > 0
    for field in ("electricity", "amortisation_years"):
        assert Settings.model_fields[field].description
    with pytest.raises(ValidationError, match="amortisation_years"):
        Settings(amortisation_years=0)


def test_every_catalog_price_is_dated_and_sourced(cat):
    quotes = [q for g in cat.gpus.values() for q in (*g.rental_prices, *g.purchase_prices)]
    assert len(quotes) >= 30
    for q in quotes:
        assert isinstance(q.as_of, dt.date)
        assert q.source.startswith("http")
    for g in cat.gpus.values():
        assert g.board_power_w is None or g.sources["board_power_w"]


def test_the_bundled_defaults_are_the_ones_their_reasons_name(cat):
    h100 = cat.gpus["h100-sxm"]
    (default,) = [q for q in h100.rental_prices if q.default]
    assert default.usd_per_gpu_hour == 2.69
    assert default.as_of == dt.date(2025, 11, 16)
    assert {q.provider for q in h100.rental_prices} >= {"AWS"}


def copy_catalog(tmp_path):
    root = tmp_path / "catalog"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return root


def test_a_bad_price_date_in_a_file_names_the_file_entry_and_field(tmp_path):
    root = copy_catalog(tmp_path)
    path = root / "gpus" / "h100-sxm.yaml"
    path.write_text(path.read_text().replace("as_of: 2026-08-22", "as_of: 2026-08-32"))
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    (problem,) = info.value.problems
    assert problem.file == "catalog/gpus/h100-sxm.yaml"
    assert problem.entry == "h100-sxm"
    assert problem.field is not None
    assert problem.field.startswith("rental_prices.")
    assert problem.field.endswith(".as_of")


def test_a_negative_electricity_price_fails_the_settings(tmp_path):
    root = copy_catalog(tmp_path)
    path = root / "settings.yaml"
    path.write_text(path.read_text().replace("usd_per_kwh: 0.1545", "usd_per_kwh: -0.1545"))
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    (problem,) = info.value.problems
    assert problem.file == "catalog/settings.yaml"
    assert problem.field == "electricity.usd_per_kwh"
