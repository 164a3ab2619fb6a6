"""A real browser on the ranking and compare pages: sorting, filtering, replicas, linking.

The expected orders and counts are computed here from the JSON index the pages
fetch, not read back from the page's own code.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest
from backpressure.generator.site.build import build_site

from tests.browser.serve import CHROMIUM, CHROMIUM_ARGS, serve
from tests.generator.fixtures import write_fixture

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():  # CI installs it; a bare dev machine may not have it
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: .ci/run must install Debian's chromium")
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

MODEL = "llama-3.1-8b"
RANK = f"model/{MODEL}/rank/"


@pytest.fixture(scope="module")
def site(tmp_path_factory, cat):
    base = tmp_path_factory.mktemp("rank")
    write_fixture(base / "sweep", cat=cat)
    build_site(base / "sweep", base / "site")
    return base / "site"


@pytest.fixture(scope="module")
def configs(site):
    doc = json.loads((site / f"api/models/{MODEL}.json").read_text(encoding="utf-8"))
    return doc["configs"]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(site, browser):
    """A page on the served site; at the end, no script error and no request off 127.0.0.1."""
    requests: list[str] = []
    errors: list[str] = []
    with serve(site) as base:
        pg = browser.new_page(viewport={"width": 1280, "height": 900})
        pg.on("request", lambda r: requests.append(r.url))
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.base = base
        pg.expect_404 = False
        yield pg
        pg.close()
    if pg.expect_404:  # the browser logs the failed fetch of a missing index
        errors = [e for e in errors if "status of 404" not in e]
    assert errors == []
    hosts = {urlparse(u).hostname for u in requests if not u.startswith(("data:", "blob:"))}
    assert hosts == {"127.0.0.1"}


def _ids(page) -> list[str]:
    return page.eval_on_selector_all(
        "#bp-rank-table tbody tr", "rows => rows.map(r => r.getAttribute('data-id'))"
    )


def _order(configs, key, desc):
    """Ids sorted by ``key``, blanks last either way, ties by id."""
    have = [c for c in configs if c[key] is not None]
    none = sorted(c["id"] for c in configs if c[key] is None)
    have.sort(key=lambda c: c["id"])
    have.sort(key=lambda c: c[key], reverse=desc)
    return [c["id"] for c in have] + none


def _open_rank(page, fragment=""):
    page.goto(page.base + RANK + fragment)
    page.wait_for_selector("#bp-rank-table tbody tr")


def test_ranks_by_rate_then_sorts_by_a_clicked_column(page, configs):
    _open_rank(page)
    assert _ids(page) == _order(configs, "breaking_rps_low", desc=True)
    assert "serves" in {c["status"] for c in configs}
    page.click('button[data-sort="cost"]')
    cheap = _order(configs, "usd_per_million_output_tokens_high", desc=False)
    assert _ids(page) == cheap
    assert "sort=cost" in page.evaluate("location.hash")
    page.click('button[data-sort="cost"]')  # again: the other way, blanks still last
    dear = _order(configs, "usd_per_million_output_tokens_high", desc=True)
    assert _ids(page) == dear
    assert page.get_attribute('th:has(button[data-sort="cost"])', "aria-sort") == "descending"


def test_filters_by_context_quant_and_device_kind(page, configs):
    _open_rank(page)
    page.select_option("#bp-f-context", "8192")
    assert sorted(_ids(page)) == sorted(c["id"] for c in configs if c["context"] == 8192)
    page.select_option("#bp-f-quant", "q4_k_m")
    both = [c["id"] for c in configs if c["context"] == 8192 and c["quant"] == "q4_k_m"]
    assert sorted(_ids(page)) == sorted(both)
    assert "context=8192" in page.evaluate("location.hash")
    page.select_option("#bp-f-context", "")
    page.select_option("#bp-f-quant", "")
    page.select_option("#bp-f-kind", "cpu")
    cpu = [c["id"] for c in configs if c["device_kind"] == "cpu"]
    assert cpu
    assert sorted(_ids(page)) == sorted(cpu)
    page.select_option("#bp-f-kind", "")
    page.check("#bp-f-serves")
    assert sorted(_ids(page)) == sorted(c["id"] for c in configs if c["status"] == "serves")
    # A blank explains itself: a config that does not fit says so in its rate cell.
    page.uncheck("#bp-f-serves")
    nofit = next(c["id"] for c in configs if c["status"] == "does-not-fit")
    text = page.inner_text(f'#bp-rank-table tr[data-id="{nofit}"]')
    assert "does not fit" in text


def test_the_cost_chart_plots_what_the_table_lists(page, configs):
    _open_rank(page)
    chart = '.bp-chart[data-kind="cost"]'
    page.wait_for_selector(f"{chart}[data-points]", state="attached", timeout=30000)
    points = set(
        page.evaluate(f"document.querySelector('{chart}').bpView.data('cost').map(p => p.id)")
    )
    plotted = {
        c["id"]
        for c in configs
        if c["usd_per_million_output_tokens"] and c["tokens_per_s_per_user"]
    }
    assert points == plotted
    assert len(points) > 2
    page.select_option("#bp-f-quant", "q4_k_m")
    listed = set(_ids(page))
    points = set(
        page.evaluate(f"document.querySelector('{chart}').bpView.data('cost').map(p => p.id)")
    )
    assert points == plotted & listed
    assert 0 < len(points) < len(plotted)
    assert page.get_attribute(chart, "data-points") == str(len(points))
    page.select_option("#bp-f-quant", "")  # and back: every point again
    assert page.get_attribute(chart, "data-points") == str(len(plotted))


def test_target_rate_fills_the_replicas_column(page, configs):
    _open_rank(page)
    page.fill("#bp-target", "20")
    cells = dict(
        zip(
            _ids(page),
            page.eval_on_selector_all(
                "#bp-rank-table tbody td.bp-replicas span", "s => s.map(x => x.textContent)"
            ),
            strict=True,
        )
    )
    for c in configs:
        if c["breaking_rps_low"]:
            assert cells[c["id"]] == str(math.ceil(20 / c["breaking_rps_low"])), c["id"]
        else:
            assert cells[c["id"]] == "–"
    assert "rps=20" in page.evaluate("location.hash")


def test_a_linked_view_opens_as_linked(page, configs):
    _open_rank(page, "#context=8192&quant=q4_k_m&rps=5&sort=per_user&dir=desc")
    assert page.input_value("#bp-f-context") == "8192"
    assert page.input_value("#bp-target") == "5"
    both = [c for c in configs if c["context"] == 8192 and c["quant"] == "q4_k_m"]
    assert _ids(page) == _order(both, "tokens_per_s_per_user", desc=True)


def test_ticked_configs_open_side_by_side_on_the_compare_page(page, configs):
    _open_rank(page)
    serving = [c for c in configs if c["status"] == "serves"][:2]
    for c in serving:
        page.check(f'#bp-rank-table tr[data-id="{c["id"]}"] input[type="checkbox"]')
    href = page.get_attribute("#bp-compare-go", "href")
    assert href.endswith("compare/#ids=" + ",".join(c["id"] for c in serving))
    page.click("#bp-compare-go")
    page.wait_for_selector("#bp-compare-table tbody tr")
    heads = page.eval_on_selector_all(
        "#bp-compare-table thead th a:not(.bp-remove)", "a => a.map(x => x.textContent)"
    )
    assert len(heads) == 2
    assert heads[0].startswith(serving[0]["gpu_name"])
    body = page.inner_text("#bp-compare-table tbody")
    assert f"{serving[1]['breaking_rps']:.3g} rps" in body


def test_compare_link_reports_a_bad_id_and_shows_the_rest(page, configs):
    good = [c["id"] for c in configs[:2]]
    bad = ["nonsense", "rtx-4090--llama-3.1-8b--q4_k_m--999k", "x--no-such-model--q4_k_m--8k"]
    page.goto(page.base + "compare/#ids=" + ",".join(good + bad[:2]))
    page.wait_for_selector("#bp-compare-errors li")
    errs = page.inner_text("#bp-compare-errors")
    assert "nonsense" in errs
    assert "not a config id" in errs
    assert "999k" in errs
    assert "no such config" in errs
    cols = page.locator("#bp-compare-table thead th").count() - 1
    assert cols == 2
    # A model with no index is reported too (its fetch fails), without a script error.
    page.expect_404 = True
    page.goto(page.base + "compare/#ids=" + bad[2] + "," + good[0])
    page.locator("#bp-compare-errors li", has_text="no index").wait_for()
    assert "at least two" in page.inner_text("#bp-compare-status")


def test_config_page_adds_itself_to_a_selection_in_its_address(page, configs):
    first, second = configs[0], configs[1]
    page.goto(page.base + second["url"] + "#cmp=" + first["id"])
    href = page.get_attribute("#bp-compare-link", "href")
    assert href.endswith(f"compare/#ids={first['id']},{second['id']}")
    assert page.get_attribute("#bp-rank-link", "href").endswith(
        f"rank/#cmp={first['id']},{second['id']}"
    )


def test_home_table_is_sorted_by_rate_and_explains_blanks(site):
    html = (site / "index.html").read_text(encoding="utf-8")
    assert 'class="bp-legend"' in html
    for words in ("does not fit", "too slow to use", "fails at any load", "not simulated"):
        assert words in html
