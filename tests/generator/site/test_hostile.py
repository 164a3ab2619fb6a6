"""A site built from a catalog of attacks: nothing in it would run, everything shows as text.

The same site is opened in a real browser by tests/browser/test_hostile_browser.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backpressure.generator.ci.strict_json import loads_strict

from tests.hostile import (
    ALL,
    MARK,
    ODD_ID,
    PAYLOADS,
    build_hostile_site,
    pagefind_records,
    read_page,
)

MARKUP = set("<>&\"'")
CSP = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'self'"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    built, _root = build_hostile_site(tmp_path_factory.mktemp("hostile"))
    return built


def _files(site: Path, *suffixes: str) -> list[Path]:
    return sorted(p for p in site.rglob("*") if p.is_file() and p.suffix in suffixes)


def test_the_corpus_is_large_and_every_payload_reached_a_page(site):
    assert len(PAYLOADS) >= 50
    seen: set[str] = set()
    for f in _files(site, ".html", ".svg"):
        page = read_page(f.read_text(encoding="utf-8"))
        text, attrs = "".join(page.text), "\0".join(page.attrs)
        seen.update(p for p in ALL if p in text or p in attrs)
    # Shown as the text it is: decoded, every payload is there verbatim.
    assert sorted(set(ALL) - seen) == []


def test_no_page_holds_anything_that_would_run(site):
    problems = []
    for f in _files(site, ".html", ".svg"):
        rel = f.relative_to(site).as_posix()
        page = read_page(f.read_text(encoding="utf-8"))
        problems += [f"{rel}: {p}" for p in page.problems]
        problems += [f"{rel}: catalog text in a script" for s in page.scripts if MARK.search(s)]
    assert problems == []


def test_no_payload_appears_unescaped_in_any_file(site):
    raw = [p for p in ALL if MARKUP & set(p)]
    assert len(raw) > 40
    found = []
    for f in _files(site, ".html", ".svg", ".js", ".json", ".xml", ".css"):
        text = f.read_text(encoding="utf-8", errors="replace")
        found += [f"{f.relative_to(site)}: {p[:40]!r}" for p in raw if p in text]
    assert found == []


def test_scripts_and_json_carry_no_catalog_text_as_code(site):
    for f in _files(site, ".js"):
        assert not MARK.search(f.read_text(encoding="utf-8", errors="replace")), f
    for f in _files(site, ".json"):
        data = loads_strict(f.read_bytes())  # duplicate keys, NaN: refused
        # A catalog string in JSON is a whole string value, never structure.
        for s in _strings(data):
            if MARK.search(s):
                assert json.loads(json.dumps(s)) == s


def _strings(x):
    if isinstance(x, dict):
        for k, v in x.items():
            yield k
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)
    elif isinstance(x, str):
        yield x


def test_search_index_holds_the_text_not_markup(site):
    records = pagefind_records(site)
    assert records
    text = "\n".join(
        r["content"] + "\n" + json.dumps(r["meta"], ensure_ascii=False) for r in records
    )
    # Names are indexed as the text a reader sees (Pagefind's reader escapes them
    # when it shows an excerpt: the browser test runs a search).
    for p in ("<img src=x onerror=alert(01)> BPX01", "*em* __strong__ `code` ~~del~~ BPX09"):
        assert p in text
    # ... and text that looks like a character reference stays that text.
    assert "&#60;img src=x onerror=alert(13)&#62; BPX13" in text


def test_every_page_carries_the_content_security_policy(site):
    pages = _files(site, ".html")
    assert len(pages) > 50
    missing = [p for p in pages if CSP not in p.read_text(encoding="utf-8")]
    assert missing == []


def test_an_id_of_every_allowed_character_gets_pages_and_links(site):
    assert (site / "gpu" / ODD_ID / "index.html").is_file()
    assert any((site / "gpu" / ODD_ID).glob("*/*/*/index.html"))


@pytest.mark.slow
def test_the_checks_catch_a_name_that_is_only_html_escaped(tmp_path, monkeypatch):
    # The checks above are only worth something if they fail on the defect they
    # guard against: Markdown pages that HTML-escape names but let Markdown read them.
    from backpressure.generator.site import render
    from markupsafe import escape

    from tests import hostile

    monkeypatch.setattr(render, "md_text", lambda value: escape(str(value)))
    # (mkdocs' strict mode would stop at a Markdown link to a missing page first)
    monkeypatch.setattr(hostile, "PAYLOADS", tuple(p for p in PAYLOADS if "](x)" not in p))
    built, _root = build_hostile_site(tmp_path)
    problems = [
        p for f in _files(built, ".html") for p in read_page(f.read_text(encoding="utf-8")).problems
    ]
    assert any("script URL: 'javascript:alert(03)'" in p for p in problems), problems[:5]
