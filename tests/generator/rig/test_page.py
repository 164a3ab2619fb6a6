"""The builder's page on the built site: its weight, its honesty notes, every config's link."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import urljoin

import pytest
from backpressure.generator.paths import WEB_RIG
from backpressure.generator.rig.build import run, spec_of
from backpressure.generator.rig.data import DATA_DIR, ConfigRef, device_json, index_json
from backpressure.generator.rig.doc import parse
from backpressure.generator.rig.page import FIRST_LOAD_BUDGET, weight
from backpressure.generator.site.build import build_site
from backpressure.generator.site.links import has_page
from backpressure.generator.sweep.combos import enumerate_combos

from tests.generator.fixtures import write_fixture

LINK = re.compile(r'<a href="([^"]*rig/#[^"]*)">Open in the rig builder</a>')


@pytest.fixture(scope="module")
def built(tmp_path_factory, cat):
    base = tmp_path_factory.mktemp("rig-site")
    rows = write_fixture(base / "sweep", cat=cat)
    build_site(base / "sweep", base / "site")
    return base / "site", rows


def test_first_load_fits_the_budget_for_the_whole_catalog(cat):
    """The index of every config, and the default device's file as if every config fitted."""
    refs = [
        ConfigRef(c.id, c.device, c.model, c.quant, c.context, c.kv_dtype, c.runtime)
        for c in enumerate_combos(cat)
    ]
    index = index_json(cat, refs)
    device = index["default_config"].split("--")[0]
    mine = [r for r in refs if r.gpu == device]
    files = {
        f"{DATA_DIR}/index.json": json.dumps(index, sort_keys=True, separators=(",", ":")),
        f"{DATA_DIR}/gpu/{device}.json": json.dumps(
            device_json(cat, device, mine), sort_keys=True, separators=(",", ":")
        ),
    }
    w = weight(files, WEB_RIG, device)
    assert w["first_load"] == w["scripts"] + w["index"] + w["default_device"]
    assert w["scripts"] > 50_000  # every module of web/rig/ counted, not just app.js
    assert w["first_load"] <= FIRST_LOAD_BUDGET, w


def test_the_page_states_its_weight_and_approximations(built):
    site, _ = built
    raw = (site / "rig" / "index.html").read_text(encoding="utf-8")
    page = html.unescape(raw)  # the text a reader sees (numbers may be written as entities)
    data = {
        p.relative_to(site).as_posix(): p.read_text(encoding="utf-8")
        for p in (site / DATA_DIR).rglob("*.json")
    }
    w = weight(data, WEB_RIG, "rtx-4090")
    assert f"{w['first_load']:,}" in page
    assert f"{FIRST_LOAD_BUDGET:,}" in page
    assert f"{w['scripts']:,}" in page
    assert "not fractional Brownian motion" in page
    assert "M/M/c" in page  # the pool's wait is an M/M/1 upper bound, said so
    assert 'id="bp-rig"' in page
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", raw, re.S)
    assert any("assets/rig/app.js" in attrs and 'type="module"' in attrs for attrs, _ in scripts)
    for rel in ("assets/rig/app.js", "assets/rig/engine/run.js", f"{DATA_DIR}/index.json"):
        assert (site / rel).is_file()


def test_every_config_page_opens_its_config_in_the_builder(built, cat):
    site, rows = built
    paged = [r for r in rows if has_page(r)]  # a config that does not fit has no page
    assert paged
    for r in paged:
        page = (site / r.permalink / "index.html").read_text(encoding="utf-8")
        [href] = LINK.findall(page)
        href = html.unescape(href)
        target = urljoin(f"https://example.org/{r.permalink}", href)
        assert target.startswith("https://example.org/rig/#v=1&"), target
        rig = parse(target)
        [node] = rig.nodes
        assert dict(node.fields)["config"] == r.config_id
        assert rig.seed == cat.settings.seed


def test_a_config_link_runs_at_its_breaking_rate(built, cat):
    """The fitting config's rig builds from the catalog and its sweep brackets the rate."""
    site, rows = built
    row = next(r for r in rows if r.config_id == "rtx-4090--llama-3.1-8b--q4_k_m--8k")
    page = (site / row.permalink / "index.html").read_text(encoding="utf-8")
    rig = parse(html.unescape(LINK.findall(page)[0]))
    spec = spec_of(rig, cat)
    assert [n.name for n in spec.nodes] == ["llm"]
    assert spec.nodes[0].llm is not None
    assert rig.sweep is not None
    start, step, points = rig.sweep
    assert start + step * (points - 1) >= row.breaking_rps
    _, rep = run(spec, rig.seed)
    assert rep.bottleneck.startswith("llm")
