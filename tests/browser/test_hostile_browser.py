"""The hostile catalog's site in a real browser: nothing runs, nothing is injected.

Every page but the configs, a sample of config pages and the search results for
hostile names are opened in Debian's chromium. ``alert``, ``confirm`` and
``prompt`` are hooked before any page script, dialogs and Content-Security-
Policy violations are recorded, and the live DOM is scanned for what an
injection would leave (event-handler attributes, script URLs, inline scripts,
frames). A last test shows the policy is live: a script and an inline handler
added to a page by hand are both refused.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.serve import CHROMIUM, CHROMIUM_ARGS, serve
from tests.hostile import ODD_ID, build_hostile_site

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: .ci/run must install Debian's chromium")
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

HOOKS = """
window.__bp = {hits: [], violations: []};
for (const name of ["alert", "confirm", "prompt", "print"]) {
  window[name] = (...args) => { window.__bp.hits.push(name + ":" + args.join(",")); };
}
document.addEventListener("securitypolicyviolation", (e) => {
  window.__bp.violations.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""

SCAN = """
() => {
  const bad = [];
  const urlAttrs = ["href", "src", "action", "formaction", "data", "xlink:href", "poster"];
  // Forms our own scripts make: Pagefind's search box and Vega's (empty) bindings.
  const ours = (el) => el.closest("form.pagefind-ui__form, form.vega-bindings");
  for (const el of document.querySelectorAll("*")) {
    const tag = el.tagName.toLowerCase();
    if (ours(el) && (tag !== "form" || !el.hasAttribute("action") ||
                     el.getAttribute("action") === "javascript:void(0);")) continue;
    for (const a of el.attributes) {
      const n = a.name.toLowerCase(), v = a.value.trim().toLowerCase();
      if (n.startsWith("on")) bad.push(tag + " " + n);
      const scriptUrl = /^(javascript|data|vbscript):/.test(v);
      if (urlAttrs.includes(n) && scriptUrl) bad.push(tag + " " + n + "=" + v);
    }
    if (["iframe", "object", "embed", "base", "form", "frame"].includes(tag)) bad.push(tag);
    const ourData = ["__config", "bp-chart-data"].includes(el.id);
    if (tag === "script" && !el.src && !ourData) bad.push("inline script");
    const refresh = (el.httpEquiv || "").toLowerCase() === "refresh";
    if (tag === "meta" && refresh) bad.push("meta refresh");
  }
  return bad;
}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    built, _root = build_hostile_site(tmp_path_factory.mktemp("hostile-browser"))
    return built


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _pages(site: Path) -> list[str]:
    """Every page but the config pages, and six config pages (the odd id's among them)."""
    html = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    configs = [p for p in html if p.count("/") == 5 and p.startswith("gpu/")]
    others = [p for p in html if p not in configs]
    sample = [p for p in configs if ODD_ID in p][:2] + configs[:: max(1, len(configs) // 4)][:4]
    return [p.removesuffix("index.html") for p in others + sample]


# Scripts that fetch data after the page has loaded: a page with one is scanned once
# the network is quiet (half a second of nothing), the rest once they have loaded.
FETCHING = ("bp/rank.js", "bp/compare.js", "rig/app.js", "bp/notfound.js", "pagefind-ui.js")


def _fetches(site: Path, rel: str) -> bool:
    f = site / rel if rel.endswith(".html") else site / rel / "index.html"
    html = f.read_text(encoding="utf-8")
    return any(s in html for s in FETCHING)


def _open(browser, url: str, settle: bool = True):
    page = browser.new_page()
    page.add_init_script(HOOKS)
    dialogs: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url)  # returns at the load event: every script of the page has run
    if settle:
        page.wait_for_load_state("networkidle")
    return page, dialogs, errors


def test_no_page_runs_or_injects_anything(site, browser):
    paths = _pages(site)
    assert len(paths) > 20
    report = []
    with serve(site) as base:
        for rel in paths:
            page, dialogs, errors = _open(browser, base + rel, _fetches(site, rel))
            if page.query_selector(".bp-chart"):
                page.wait_for_selector(".bp-chart[data-rendered]", timeout=15000)
            state = page.evaluate("window.__bp")
            injected = page.evaluate(SCAN)
            page.close()
            for what, found in (
                ("ran", state["hits"]),
                ("dialog", dialogs),
                ("policy violation", state["violations"]),
                ("injected", injected),
                ("error", errors),
            ):
                report += [f"{rel}: {what}: {x}" for x in found]
    assert report == [], "\n".join(report)


@pytest.mark.parametrize("query", ["BPX01", "BPX04", "BPX17", "BPX33", "onerror", "script"])
def test_search_results_for_hostile_names_are_text(site, browser, query):
    with serve(site) as base:
        page, dialogs, errors = _open(browser, base)
        page.wait_for_selector("#bp-search input")
        page.fill("#bp-search input", query)
        page.wait_for_selector(".pagefind-ui__result", timeout=15000)
        page.wait_for_load_state("networkidle")
        titles = page.eval_on_selector_all(
            ".pagefind-ui__result-title", "els => els.map(e => e.textContent)"
        )
        state = page.evaluate("window.__bp")
        injected = page.evaluate(SCAN)
        # Pagefind's own API: the excerpt it builds is escaped text with <mark> only.
        excerpts = page.evaluate(
            """async (q) => {
                const pf = await import(new URL("pagefind/pagefind.js", location.href).href);
                const found = await pf.search(q);
                const data = await Promise.all(found.results.slice(0, 5).map(r => r.data()));
                return data.map(d => d.excerpt);
            }""",
            query,
        )
        page.close()
    assert titles
    assert (state["hits"], dialogs, state["violations"], injected, errors) == ([], [], [], [], [])
    for excerpt in excerpts:
        assert "<" not in excerpt.replace("<mark>", "").replace("</mark>", ""), excerpt


def test_the_policy_refuses_a_script_added_by_hand(site, browser):
    # The second wall on its own: if escaping ever failed, an injected script or
    # handler would still not run.
    with serve(site) as base:
        page, dialogs, _errors = _open(browser, base + "methodology/")
        page.evaluate(
            """() => {
                const s = document.createElement("script");
                s.textContent = "alert('inline')";
                document.body.appendChild(s);
                document.body.insertAdjacentHTML("beforeend", '<img src="x" onerror="alert(1)">');
                const a = document.createElement("a");
                a.href = "javascript:alert('href')";
                document.body.appendChild(a);
                a.click();
            }"""
        )
        page.wait_for_timeout(500)
        state = page.evaluate("window.__bp")
        page.close()
    assert state["hits"] == []
    assert dialogs == []
    assert len(state["violations"]) >= 2, state
