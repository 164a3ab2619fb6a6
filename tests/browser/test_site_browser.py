"""A real browser against the built site: search, a config page, a chart drawn as SVG.

Runs Debian's chromium (never a downloaded browser) against a local http.server;
every request the page makes must stay on 127.0.0.1.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from backpressure.generator.site.build import build_site
from backpressure.generator.site.chart_pack import pack, unpack

from tests.browser.serve import CHROMIUM, CHROMIUM_ARGS, serve, wait_until
from tests.generator.fixtures import write_fixture

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():  # CI installs it; a bare dev machine may not have it
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: .ci/run must install Debian's chromium")
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

FIT = "gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/"
PAIR, ANCHOR = "gpu/rtx-4090/llama-3.1-8b/", "q4_k_m-8k"
NOFIT = "gpu/rtx-4090/llama-3.3-70b/q4_k_m/8k/"  # no page: the 404 page sends it to its row


@pytest.fixture(scope="module")
def site(tmp_path_factory, cat):
    base = tmp_path_factory.mktemp("browser")
    write_fixture(base / "sweep", cat=cat)
    build_site(base / "sweep", base / "site")
    return base / "site"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def test_search_then_config_page_draws_svg_chart(site, browser):
    requests: list[str] = []
    errors: list[str] = []
    with serve(site) as base:
        page = browser.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

        page.goto(base)
        page.wait_for_selector("#bp-search input")
        page.fill("#bp-search input", "4090 llama 3.1 8b q4")
        # Search finds the GPU x model page (config pages are not indexed); its row links the page.
        link = page.wait_for_selector(f'.pagefind-ui__result-link[href*="{PAIR}"]', timeout=15000)
        link.click()
        page.wait_for_url(f"**/{PAIR}")
        page.click(f'tr[id="{ANCHOR}"] a[href="q4_k_m/8k/"]')
        page.wait_for_url(f"**/{FIT}")

        page.wait_for_selector(
            '.bp-chart[data-kind="breaking"][data-rendered="svg"]', timeout=15000
        )
        assert page.locator('.bp-chart[data-kind="breaking"] svg.marks').count() == 1
        assert page.locator(".bp-chart[data-rendered] .bp-sketch").count() == 0
        page.close()

    assert errors == []
    hosts = {urlparse(u).hostname for u in requests if not u.startswith(("data:", "blob:"))}
    assert hosts == {"127.0.0.1"}, sorted(u for u in requests if "127.0.0.1" not in u)


def test_404_page_sends_a_permalink_without_a_page_to_its_row(site, browser):
    errors: list[str] = []
    with serve(site) as base:
        page = browser.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        assert not (site / NOFIT).exists()
        page.goto(base + NOFIT)
        page.wait_for_url("**/gpu/rtx-4090/llama-3.3-70b/#q4_k_m-8k")
        assert page.locator('tr[id="q4_k_m-8k"]').count() == 1
        assert page.evaluate("document.querySelector(':target').id") == "q4_k_m-8k"

        # The mapping on its own, as the 404 page's script defines it.
        page.goto(base + "gpu/no/such/page/here/x/y/")
        page.wait_for_load_state("load")
        assert page.url == base + "gpu/no/such/page/here/x/y/"  # not a permalink: stays put
        target = "bpNotFoundTarget"
        cases = {
            "/gpu/rtx-4090/llama-3.3-70b/q4_k_m/8k/": "/gpu/rtx-4090/llama-3.3-70b/#q4_k_m-8k",
            "/bp/gpu/a/b/fp8/32k/kv-fp8/": "/bp/gpu/a/b/#fp8-32k-kv-fp8",
            "/gpu/a/b/q/8k/index.html": "/gpu/a/b/#q-8k",
            "//evil.example/gpu/a/b/q/8k/": None,  # protocol-relative: another host
            "/gpu/a/b/q/8k/../../../x/": None,
            "/gpu/A/b/q/8k/": None,  # not an id
            "/gpu/a/b/q/8k/extra/": None,
            "/gpu/a/b/q/eight/": None,
            "/gpu/a%2F..%2F/b/q/8k/": None,
            "/gpu/a/b/q/8k/\\evil.example/": None,
        }
        for path, want in cases.items():
            assert page.evaluate(f"window.{target}({path!r})") == want, path
        page.close()
    assert errors == []


def test_a_models_hub_ranks_first_for_its_name(site, browser):
    with serve(site) as base:
        page = browser.new_page()
        page.goto(base + "search/")
        page.wait_for_selector("#bp-search input")
        page.fill("#bp-search input", "Llama 3.1 8B Instruct")
        # The results are listed in rank order at once and each fills in when its
        # fragment arrives, in any order: wait for the first one's own link.
        first = page.locator(".pagefind-ui__result").first.locator(".pagefind-ui__result-link")
        first.wait_for(timeout=15000)
        assert first.get_attribute("href").endswith("model/llama-3.1-8b/")
        # The GPU x model pages follow, each with its headline numbers in the excerpt.
        wait_until(page, "document.querySelectorAll('.pagefind-ui__result').length > 1")
        hrefs = [
            a.get_attribute("href") for a in page.query_selector_all(".pagefind-ui__result-link")
        ]
        assert any(h.endswith("gpu/rtx-4090/llama-3.1-8b/") for h in hrefs)
        page.close()


@pytest.mark.parametrize(
    "path", ["", FIT, PAIR, "gpu/rtx-4090/", "model/llama-3.1-8b/", "methodology/"]
)
def test_pages_fit_a_390_px_phone_screen(site, browser, path):
    # A table may scroll inside its own box; the page itself must not scroll sideways.
    with serve(site) as base:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(base + path)
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        page.close()
    assert width <= 390, f"/{path} is {width} px wide on a 390 px screen"


BP_JS = Path(__file__).resolve().parents[2] / "templates" / "assets" / "bp" / "bp.js"


def test_the_browser_unpacks_chart_data_as_python_does(browser):
    """bp.js's unpack, run in chromium, gives the rows Python's unpack gives."""
    source = re.search(r"\n  function unpack\(packed\) \{\n.*?\n  \}\n", BP_JS.read_text(), re.S)
    assert source, "bp.js no longer defines unpack(packed) where this test looks"
    series = ["queue depth", "occupancy", "p99 TTFT [ms]"]
    timeline = [
        {"metric": m, "t": float(t), "value": 0.0 if t % 3 else t * 1.25 + i}
        for i, m in enumerate(series)
        for t in range(40)
    ]
    curve = [
        {"rps": 0.25 * k, "ms": 100.0 + k * 0.1, "n": None if k == 3 else k} for k in range(12)
    ]
    shares = [{"series": m, "rps": x, "share": x / 4} for m in series for x in (0.3, 1.1, 2.0, 3.7)]
    packed = pack(
        {"timeline": {"timeline": timeline}, "breaking": {"latency": curve, "shares": shares}}
    )
    kinds = {
        "list" if isinstance(column, list) else next(iter(column))
        for sets in packed.values()
        for data in sets.values()
        for column in data["c"].values()
    }
    assert kinds == {"list", "cycle", "seq", "runs"}  # every encoding bp.js must read
    page = browser.new_page()
    got = page.evaluate(
        "([fn, sets]) => { const unpack = new Function('return (' + fn + ')')();"
        " const out = {}; for (const k of Object.keys(sets)) { out[k] = {};"
        " for (const n of Object.keys(sets[k])) out[k][n] = unpack(sets[k][n]); } return out; }",
        [source.group(0).strip(), packed],
    )
    page.close()
    for kind, sets in packed.items():
        for name, data in sets.items():
            assert got[kind][name] == unpack(data), (kind, name)
