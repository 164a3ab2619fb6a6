"""The built site: pages, permalinks, JSON API, search, determinism, safety."""

from __future__ import annotations

import dataclasses
import filecmp
import json
import re
from pathlib import Path

import pytest
from backpressure.generator.records import permalink
from backpressure.generator.results_io import (
    CURVES,
    RESULTS,
    curves_jsonl,
    read_results,
    results_csv,
)
from backpressure.generator.site.build import build_site
from backpressure.generator.site.links import row_anchor
from backpressure.generator.site.publish import assemble

from tests.generator.fixtures import _curves, make_rows, write_fixture, write_sweep

FIT = "rtx-4090--llama-3.1-8b--q4_k_m--8k"
NOFIT = "rtx-4090--llama-3.3-70b--q4_k_m--8k"


@pytest.fixture(scope="module")
def built(tmp_path_factory, cat):
    base = tmp_path_factory.mktemp("site")
    rows = write_fixture(base / "sweep", cat=cat)
    report = build_site(base / "sweep", base / "site")
    return base / "site", rows, report


def _page(site: Path, row) -> str:
    return (site / row.permalink / "index.html").read_text(encoding="utf-8")


def test_fitting_configs_have_a_page_and_badge_the_others_an_anchored_row(built):
    site, rows, report = built
    assert report.configs == len(rows)
    assert any(not r.fits for r in rows)
    assert any(r.fits for r in rows)
    for r in rows:
        assert r.permalink == permalink(r.gpu, r.model, r.quant, r.context, r.kv_dtype)
        assert (site / r.permalink / "index.html").is_file() is r.fits, r.config_id
        assert (site / r.permalink / "badge.svg").is_file() is r.fits, r.config_id
        pair = (site / "gpu" / r.gpu / r.model / "index.html").read_text(encoding="utf-8")
        assert pair.count(f'<tr id="{row_anchor(r)}"') == 1, r.config_id
    assert not (site / "api" / "configs").exists()


def test_files_per_config_are_what_the_design_says(built):
    """Under gpu/: a page and a badge per fitting config, a page per GPU x model, the hubs."""
    site, rows, _ = built
    expected = {f"gpu/{d}/index.html" for d in {r.gpu for r in rows}} | {"gpu/index.html"}
    expected |= {f"gpu/{r.gpu}/{r.model}/index.html" for r in rows}
    for r in rows:
        if r.fits:
            expected |= {f"{r.permalink}index.html", f"{r.permalink}badge.svg"}
    files = {f for f in assemble.site_files(site) if f.startswith("gpu/")}
    assert files == expected
    api = {f for f in assemble.site_files(site) if f.startswith("api/")}
    models = {r.model for r in rows}
    # one file per model (the ranking and compare pages read it too), and the index
    want = {f"api/models/{m}.json" for m in models}
    assert api == {"api/models.json"} | want


def test_model_json_lists_every_config_of_the_model(built, cat):
    from backpressure.generator.site.model_json import ROW_FIELDS

    site, rows, _ = built
    index = json.loads((site / "api" / "models.json").read_text())
    assert [i["model"] for i in index] == sorted({r.model for r in rows})
    for entry in index:
        raw = (site / entry["url"]).read_text(encoding="utf-8")
        data = json.loads(raw)
        assert list(data) == ["configs", "model", "name"]
        assert data["model"] == entry["model"]
        assert data["name"] == cat.models[entry["model"]].name
        mine = sorted((r for r in rows if r.model == entry["model"]), key=lambda r: r.config_id)
        assert [i["id"] for i in data["configs"]] == [r.config_id for r in mine]
        assert entry["configs"] == len(mine)
        assert entry["fits"] == sum(r.fits for r in mine)
        lines = raw.splitlines()[1:-1]
        assert len(lines) == len(mine)
        for line, item, r in zip(lines, data["configs"], mine, strict=True):
            canonical = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            assert line.removesuffix(",") == canonical
            for key in ROW_FIELDS:
                assert item[key] == getattr(r, key), (r.config_id, key)
            for key in ("usd_per_hour", "usd_per_million_output_tokens"):
                assert key in item
            assert item["page"] is r.fits
            if r.fits:
                assert item["url"] == r.permalink
                assert (site / item["url"] / "index.html").is_file()
            else:
                page, _, anchor = item["url"].partition("#")
                assert page == f"gpu/{r.gpu}/{r.model}/"
                assert anchor == row_anchor(r)


def test_hub_pages_exist(built):
    site, rows, _ = built
    for path in ("index.html", "methodology/index.html", "gpu/index.html", "model/index.html"):
        assert (site / path).is_file(), path
    for r in rows:
        assert (site / "gpu" / r.gpu / "index.html").is_file()
        assert (site / "model" / r.model / "index.html").is_file()
    assert not (site / assemble.SHELL_DIR).exists()


def test_config_page_says_what_it_must(built):
    site, rows, _ = built
    row = next(r for r in rows if r.config_id == FIT)
    html = _page(site, row)
    assert row.verdict.split(":")[0] in html
    assert "floor(17.43 / 1.00) = 17" in html.replace("&nbsp;", " ")
    assert "±20 %" in html
    for kind in ("breaking", "occupancy", "timeline"):
        assert f'data-kind="{kind}"' in html
    assert html.count("<svg") >= 3  # static fallbacks
    for label in ("datasheet", "config.json", "calibrated", "assumed"):
        assert f">{label}</span>" in html
    assert "api/models/llama-3.1-8b.json" in html
    # Siblings: the other contexts and quants of this GPU x model, the same config elsewhere.
    nav = html[
        html.index('<nav class="bp-siblings"') : html.index("</nav>", html.index("bp-siblings"))
    ]
    assert "<strong>8k</strong>" in nav
    assert 'href="../32k/">32k</a>' in nav
    assert 'href="../../q8_0/8k/">q8_0</a>' in nav
    assert 'href="../../../../2x-rtx-4090/llama-3.1-8b/q4_k_m/8k/"' in nav or "elsewhere" not in nav
    assert 'href="../../">every config on this device</a>' in nav
    assert "badge.svg" in html
    assert "bp-snippet" in html
    assert "assets/vega/vega.min.js" in html


def test_config_pages_carry_the_theme_config_without_its_interface_strings(built):
    # The strings label search results and copy buttons, which a config page does
    # not have; the rest of the theme's config (base path, search worker) stays.
    site, rows, _ = built
    html = _page(site, next(r for r in rows if r.config_id == FIT))
    found = re.findall(r'<script id="__config" type="application/json">(.*?)</script>', html)
    assert len(found) == 1
    config = json.loads(found[0])
    assert config["translations"] == {}
    assert config["base"] == "../../../../.."
    assert config["search"].endswith(".min.js")
    assert 'data-md-component="search"' not in html
    assert "md-clipboard" not in html
    # the hub pages, built by the theme itself, keep theirs
    hub = (site / "index.html").read_text(encoding="utf-8")
    assert "search.result.placeholder" in hub


def test_a_config_that_does_not_fit_is_a_row_its_hub_cells_link_to(built):
    site, rows, _ = built
    row = next(r for r in rows if r.config_id == NOFIT)
    assert not (site / row.permalink).exists()
    pair = (site / "gpu" / row.gpu / row.model / "index.html").read_text(encoding="utf-8")
    start = pair.index(f'<tr id="{row_anchor(row)}"')
    tr = pair[start : pair.index("</tr>", start)]
    assert "does not fit" in tr
    assert "short" in tr
    assert "no page" in tr
    target = f"{row.model}/#{row_anchor(row)}"
    gpu_hub = (site / "gpu" / row.gpu / "index.html").read_text(encoding="utf-8")
    assert f'href="../../gpu/{row.gpu}/{target}"' in gpu_hub
    model_hub = (site / "model" / row.model / "index.html").read_text(encoding="utf-8")
    assert f'href="../../gpu/{row.gpu}/{target}"' in model_hub


def test_404_page_maps_permalinks_by_a_script_file_and_says_so_in_text(built):
    site, _, _ = built
    html = (site / "404.html").read_text(encoding="utf-8")
    assert '<script src="/assets/bp/notfound.js"></script>' in html
    for attrs in re.findall(
        r"<script\b([^>]*)>", html
    ):  # no inline script (CSP); data is no script
        assert "src=" in attrs or 'type="application/json"' in attrs, attrs
    assert "#&lt;quant&gt;-&lt;context&gt;" in html  # the rule, for readers without scripts
    assert (site / "assets" / "bp" / "notfound.js").is_file()


def test_nav_lists_no_config_or_hub(built):
    site, _rows, _ = built
    html = (site / "index.html").read_text()
    nav = html[html.index('<nav class="md-nav md-nav--primary"') : html.index("</nav>")]
    assert "llama-3.1-8b" not in nav
    assert "rtx-4090" not in nav


def test_every_relative_link_resolves(built):
    site, _, _ = built
    files = assemble.site_files(site)
    assert assemble.broken_links(site, files) == []


def test_nothing_is_fetched_from_another_host(built):
    site, _, _ = built
    pattern = re.compile(r'<(?:script|link|img|iframe)[^>]+(?:src|href)="(?:https?:)?//', re.I)
    for f in sorted(site.rglob("*.html")):
        text = f.read_text(encoding="utf-8")
        assert not pattern.search(text), f
        assert "fonts.googleapis" not in text, f
        assert "cdn.jsdelivr" not in text, f
    for f in sorted(site.rglob("*.css")):
        assert not re.search(r"@import\s+url\(['\"]?https?:", f.read_text(errors="ignore")), f


def test_search_index_is_written(built):
    site, _, _ = built
    assert (site / "pagefind" / "pagefind.js").is_file()
    assert (site / "pagefind" / "pagefind-ui.js").is_file()
    assert not (site / "pagefind-configs").exists()  # config pages are not indexed
    assert (site / "gpu" / "rtx-4090" / "llama-3.1-8b" / "index.html").is_file()


def test_two_builds_are_byte_identical(built, tmp_path):
    site, _, _ = built
    src = site.parent / "sweep"
    build_site(src, tmp_path / "again")
    cmp = filecmp.dircmp(site, tmp_path / "again")

    def diffs(c):
        out = [*c.left_only, *c.right_only, *c.diff_files, *c.funny_files]
        for sub in c.subdirs.values():
            out += diffs(sub)
        return out

    assert diffs(cmp) == []
    # dircmp compares shallowly by stat; check the bytes of every file too.
    for f in sorted(p for p in site.rglob("*") if p.is_file()):
        other = tmp_path / "again" / f.relative_to(site)
        assert f.read_bytes() == other.read_bytes(), f


def test_failed_build_leaves_old_site_intact(built, tmp_path, cat):
    site, rows, _ = built
    out = tmp_path / "site"
    build_site(site.parent / "sweep", out)
    before = (out / "index.html").read_bytes()
    evil = tmp_path / "evil"
    evil.mkdir()
    bad = [dataclasses.replace(rows[0], permalink="../../escaped/"), *rows[1:]]
    write_sweep(evil, bad, [_curves(r) for r in rows])
    with pytest.raises(assemble.SiteError, match="outside the site"):
        build_site(evil, out)
    assert (out / "index.html").read_bytes() == before
    assert not (tmp_path / "site.tmp").exists()
    assert not (tmp_path / "escaped").exists()


@pytest.mark.parametrize(
    "rel", ["../x", "/etc/passwd", "a/../../b", "a\\b", ".hidden/x", "a/./b", "a b/c"]
)
def test_writer_refuses_paths_that_escape(tmp_path, rel):
    with pytest.raises(assemble.SiteError):
        assemble.Writer(tmp_path).write(rel, "x")


def test_catalog_strings_are_escaped(tmp_path, cat):
    rows = make_rows([("rtx-4090", "llama-3.1-8b", "q4_k_m", 8192)], cat)
    hostile = dataclasses.replace(rows[0], verdict="<script>alert(1)</script> *x* [a](b)")
    write_sweep(tmp_path / "sweep", [hostile], [_curves(hostile)])
    build_site(tmp_path / "sweep", tmp_path / "site")
    html = (tmp_path / "site" / hostile.permalink / "index.html").read_text()
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)" in html
    home = (tmp_path / "site" / "index.html").read_text()
    assert "<script>alert(1)" not in home
    assert read_results(tmp_path / "sweep")[0].verdict == hostile.verdict


def test_sitemap_lists_absolute_urls_without_dates():
    import gzip

    files = assemble.sitemap("https://example.org/bp/", ["gpu/a/", ""])
    xml = files["sitemap.xml"].decode()
    assert xml.index("<loc>https://example.org/bp/</loc>") < xml.index("bp/gpu/a/</loc>")
    assert "lastmod" not in xml
    assert gzip.decompress(files["sitemap.xml.gz"]) == files["sitemap.xml"]
    assert assemble.sitemap("", ["gpu/a/"]) == {}


def test_the_site_reads_back_the_sweep_it_was_given(tmp_path, cat):
    from backpressure.generator.results_io import read_curves
    from backpressure.generator.site.data import read_curve_lines, read_rows

    rows = make_rows(cat=cat)
    odd = dataclasses.replace(rows[0], verdict='a "quoted", comma\nnew line', bottleneck="")
    written = sorted([odd, *rows[1:]], key=lambda r: r.config_id)
    curves = {r.config_id: _curves(r) for r in rows}
    (tmp_path / RESULTS).write_text(results_csv(written))
    (tmp_path / CURVES).write_text(curves_jsonl(curves.values()))
    assert read_rows(tmp_path) == read_results(tmp_path) == written
    assert any(r.p99_break_rps is None for r in read_rows(tmp_path))
    assert dict(read_curve_lines(tmp_path)) == read_curves(tmp_path) == curves
    (tmp_path / RESULTS).write_text("config_id,slots\nx,1\n")
    with pytest.raises(assemble.SiteError, match="other columns"):
        read_rows(tmp_path)


def test_nearest_fits_index_agrees_with_the_definition(cat):
    from backpressure.generator.site.pages import NEAREST, NearestFits, _distance

    rows = make_rows(cat=cat)
    near = NearestFits(rows)
    for row in rows:
        # The definition, row by row: fitting configs of the model on this device,
        # or at this quant and context, nearest first.
        pool = [
            r
            for r in rows
            if r.model == row.model
            and r.fits
            and (r.gpu == row.gpu or (r.quant, r.context) == (row.quant, row.context))
        ]
        expected = [] if row.fits else sorted(pool, key=lambda r: _distance(row, r))[:NEAREST]
        assert near(row) == expected
    assert any(near(r) for r in rows)
