"""The rig builder in a real browser: wiring, running, sharing, bad input, the same bytes.

Debian's chromium (never a downloaded build) against the built site on a local
http.server; every request stays on 127.0.0.1 and the page logs no error. The
time from pressing Run to the first result is measured and reported, never
asserted (benchmarks/bench_rig.py measures it too).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest
from backpressure.catalog.scenario import load_parts, load_scenario
from backpressure.generator.ci.goldens import SIM_RUNS
from backpressure.generator.ci.verify import verify_rig
from backpressure.generator.paths import GOLDENS
from backpressure.generator.rig.build import spec_json
from backpressure.generator.rig.page import FIRST_LOAD_BUDGET
from backpressure.generator.simulate import build_spec, served_for
from backpressure.generator.site.build import build_site

from tests.browser.serve import CHROMIUM, CHROMIUM_ARGS, serve, wait_until
from tests.generator.fixtures import write_fixture
from tests.generator.rig.rigs import RUNNER, data, generated, python_ticks, sha256

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():  # CI installs it; a bare dev machine may not have it
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: .ci/run must install Debian's chromium")
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

CONFIG = "gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/"
SHOTS = Path(os.environ.get("BP_RIG_SHOTS", "build/screenshots"))
MEASURES = SHOTS.parent / "rig-measures.json"  # the recorded numbers, for review


@pytest.fixture(scope="module")
def site(tmp_path_factory, cat):
    base = tmp_path_factory.mktemp("rig-browser")
    write_fixture(base / "sweep", cat=cat)
    build_site(base / "sweep", base / "site")
    test_dir = base / "site" / "rigtest"  # the comparison jobs, served beside the engine
    test_dir.mkdir()
    shutil.copy(RUNNER.parent / "jobs.mjs", test_dir / "jobs.js")
    return base / "site"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Watch:
    """A page whose errors and requests are recorded."""

    def __init__(self, browser, width=1280):
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self, url, rig=True):
        self.page.goto(url)
        if rig:  # the builder has run (or refused) once it sets its state
            self.page.wait_for_selector("#bp-rig[data-state]", timeout=30000)
        return self.page

    def close(self):
        self.page.close()
        assert self.errors == []
        local = (u for u in self.requests if not u.startswith(("data:", "blob:")))
        hosts = {urlparse(u).hostname for u in local}
        assert hosts == {"127.0.0.1"}


def _ms(page, attr):
    return float(page.get_attribute("#bp-rig", attr))


def _node(page, name):
    card = page.locator(f'details.bp-rig-node[data-node="{name}"]')
    if card.get_attribute("open") is None:
        card.locator("summary").click()
    return card


@pytest.fixture
def measure(record_property):
    """Record a number (junit property and build/rig-measures.json); never asserted on time."""
    got: dict[str, float] = {}

    def put(name: str, value: float) -> None:
        got[name] = value
        record_property(name, value)

    yield put
    MEASURES.parent.mkdir(parents=True, exist_ok=True)
    MEASURES.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def test_wire_a_node_run_and_watch_it_play(site, browser, measure):
    record_property = measure
    with serve(site) as base:
        w = Watch(browser)
        page = w.open(base + "rig/")
        # the default rig (load, app, postgres, queue, LLM: five nodes, ten minutes) ran
        assert page.locator(".bp-rig-health").count() == 4
        assert page.inner_text("#bp-rig-wiring") == "load → app → postgres; app → queue → llm"
        assert "6,000 ticks" in page.inner_text("#bp-rig-timing")
        record_property("first_result_ms_on_open", _ms(page, "data-first-result-ms"))
        page.evaluate("delete document.querySelector('#bp-rig').dataset.firstResultMs")
        page.click("#bp-rig-run")  # pressing Run: the "first result within 1 s"
        page.wait_for_selector("#bp-rig[data-first-result-ms]", state="attached")
        record_property(
            "first_result_ms_run_pressed_5_node_10_min", _ms(page, "data-first-result-ms")
        )
        record_property("engine_ms_5_node_10_min", _ms(page, "data-engine-ms"))
        # what the first load fetched: the builder's own files within its stated budget
        sizes = page.evaluate(
            """() => performance.getEntriesByType('resource')
                 .concat(performance.getEntriesByType('navigation'))
                 .map((e) => [e.name, e.decodedBodySize])"""
        )
        builder = sum(n for url, n in sizes if "/assets/rig/" in url or "/rig/data/" in url)
        record_property("first_load_bytes_builder", builder)
        record_property("first_load_bytes_page_and_theme", sum(n for _, n in sizes))
        assert 50_000 < builder <= FIRST_LOAD_BUDGET
        # wire a cache after the app tier, blocking, and run again
        page.click('[data-action="add-node"]')
        card = _node(page, "node5")
        card.locator('select[name="part"]').select_option("postgres")
        card = _node(page, "node5")
        card.locator('select[name="after"]').select_option("app")
        card.locator('select[name="discipline"]').select_option("block")
        card = _node(page, "node5")
        card.locator('input[name="pool_size"]').fill("2")
        card.locator('input[name="pool_size"]').dispatch_event("change")
        wired = "load → app → postgres; app → queue → llm; app → node5"
        assert page.inner_text("#bp-rig-wiring") == wired
        page.click("#bp-rig-run")
        page.wait_for_selector('.bp-rig-health[data-node="node5"]', timeout=30000)
        assert "node=node5%3Apostgres%3Aapp" in page.url or "node=node5:postgres:app" in page.url
        tick = int(page.get_attribute("#bp-rig-health", "data-tick"))
        wait_until(
            page, f"Number(document.querySelector('#bp-rig-health').dataset.tick) > {tick}"
        )  # the run plays
        assert page.inner_text("#bp-rig-bottleneck").strip()
        _shots(page, "wired")
        w.close()


def test_a_shared_link_replays_the_same_run_and_verifies(site, browser, cat):
    with serve(site) as base:
        w = Watch(browser)
        page = w.open(base + CONFIG, rig=False)
        html_text = (site / CONFIG / "index.html").read_text(encoding="utf-8")
        href = html.unescape(re.search(r'href="([^"]*rig/#[^"]*)"', html_text).group(1))
        assert href.startswith("../../../../../rig/#v=1&")
        page.click("text=Open in the rig builder")
        page.wait_for_selector("#bp-rig[data-state]", timeout=30000)
        page.click("#bp-rig-sweep")
        page.wait_for_selector('#bp-rig[data-sweep="done"]', timeout=300000)
        link = page.input_value("#bp-rig-link")
        verdict = page.inner_text("#bp-rig-verdict")
        bottleneck = page.inner_text("#bp-rig-bottleneck")
        breaking = page.get_attribute("#bp-rig", "data-breaking-rps")
        assert "claim=" in link
        assert f"breaking={breaking}" in link
        again = Watch(browser, width=390)
        page2 = again.open(link)
        page2.wait_for_selector('#bp-rig[data-sweep="done"]', timeout=300000)
        assert page2.inner_text("#bp-rig-bottleneck") == bottleneck
        assert "its verdict holds" in page2.inner_text("#bp-rig-verdict")
        assert page2.inner_text("#bp-rig-verdict").startswith(verdict.splitlines()[0])
        assert page2.get_attribute("#bp-rig", "data-breaking-rps") == breaking
        _shots(page2, "shared")
        again.close()
        w.close()
    outcome = verify_rig(cat, link)  # what `backpressure verify LINK` prints
    assert outcome.holds
    assert [name for name, *_ in outcome.checks] == ["verdict", "breaking rate"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("negative rate", "rps: must be greater than 0"),
        ("empty graph", "nodes: the rig is empty; add at least one node after the load"),
        ("cycle", "nodes: cycle app -> queue -> app never reaches the load"),
    ],
)
def test_a_bad_parameter_is_refused_with_a_clear_message(site, browser, edit, message):
    with serve(site) as base:
        w = Watch(browser)
        page = w.open(base + "rig/")
        if edit == "negative rate":
            page.fill('input[name="rps"]', "-5")
            page.dispatch_event('input[name="rps"]', "change")
        elif edit == "empty graph":
            while page.locator('[data-action="remove-node"]').count():
                _node(page, page.locator("details.bp-rig-node").first.get_attribute("data-node"))
                page.locator('[data-action="remove-node"]').first.click()
        else:
            _node(page, "app").locator('select[name="after"]').select_option("queue")
            assert page.inner_text("#bp-rig-wiring") == (
                "load alone; not reached from the load: app, postgres, queue, llm"
            )
        page.click("#bp-rig-run")
        page.wait_for_selector("#bp-rig-error:not([hidden])")
        assert page.inner_text("#bp-rig-error") == message
        assert page.get_attribute("#bp-rig", "data-state") == "error"
        w.close()


@pytest.mark.parametrize(
    ("fragment", "message"),
    [
        ("v=1&rps=-3&node=a:app-tier:load", "rps: must be greater than 0"),  # runs no further
        ("v=1&rps=abc&node=a:app-tier:load", "rps: expected a number, got 'abc'"),  # no parse
    ],
)
def test_a_malformed_link_says_what_is_wrong(site, browser, fragment, message):
    with serve(site) as base:
        w = Watch(browser)
        page = w.open(base + "rig/#" + fragment)
        assert page.inner_text("#bp-rig-error") == f"This link cannot be run: {message}"
        assert page.get_attribute("#bp-rig", "data-state") == "error"
        assert page.locator("details.bp-rig-node").count() >= 1  # a rig to edit instead
        w.close()


def _jobs(page, base, payload):
    return page.evaluate(
        """async ([base, input]) => {
          const run = await import(base + 'assets/rig/engine/run.js');
          const rig = await import(base + 'assets/rig/rig.js');
          const format = await import(base + 'assets/rig/engine/format.js');
          const jobs = await import(base + 'rigtest/jobs.js');
          const sha256 = async (text) => {
            const bytes = new TextEncoder().encode(text);
            const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
            return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
          };
          return jobs.runJobs(input, { run, rig, format }, sha256);
        }""",
        [base, payload],
    )


def _same_bytes_in_chromium(site, browser, cat, count):
    jobs = []
    wants = []
    for scenario, (seed, rps, duration) in sorted(SIM_RUNS.items()):
        loaded = load_scenario(
            cat.root / "scenarios" / f"{scenario}.yaml", load_parts(cat.root / "parts")
        )
        spec = build_spec(
            loaded, rps=rps, duration_s=duration, capacity=lambda **kw: served_for(cat=cat, **kw)
        )
        jobs.append({"kind": "spec", "spec": spec_json(spec), "seed": seed})
        wants.append(sha256((GOLDENS / f"{scenario}.ticks.csv").read_text(encoding="utf-8")))
    fragments = generated(count, seed=31)
    jobs += [{"kind": "rig", "fragment": f} for f in fragments]
    wants += [sha256(python_ticks(f, cat)) for f in fragments]
    index, devices = data(cat)
    payload = {"index": index, "devices": devices, "output": "sha256", "jobs": jobs}
    with serve(site) as base:
        w = Watch(browser)
        w.open(base + "rig/")
        got = _jobs(w.page, base, payload)
        w.close()
    differ = [i for i, (g, want) in enumerate(zip(got, wants, strict=True)) if g["ticks"] != want]
    assert differ == [], [json.dumps(jobs[i])[:300] for i in differ[:3]]


def test_the_golden_runs_and_generated_rigs_give_python_bytes_in_chromium(site, browser, cat):
    _same_bytes_in_chromium(site, browser, cat, 30)


# Not traced for coverage: the fast test beside it runs the same code, and tracing
# the Python side of 300 runs would double the suite's longest test.
@pytest.mark.slow
@pytest.mark.no_cover
def test_hundreds_of_generated_rigs_give_python_bytes_in_chromium(site, browser, cat):
    _same_bytes_in_chromium(site, browser, cat, 300)


def _shots(page, name):
    """Desktop and phone-width screenshots for review (never compared)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(
        path=str(SHOTS / f"rig-{name}-{page.viewport_size['width']}.png"), full_page=True
    )
