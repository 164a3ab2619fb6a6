"""A page shows what the build computed with: edit settings.yaml and the pages follow."""

from __future__ import annotations

import html as html_module
import json
import re
import shutil
from pathlib import Path

import pytest
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.generator.site.build import build_site
from backpressure.generator.site.chart_pack import unpack

from tests.generator.fixtures import write_fixture

COMBOS = (
    ("rtx-4090", "llama-3.1-8b", "q4_k_m", 8192),
    ("h100-sxm", "llama-3.1-8b", "fp8", 8192),
)
# The bundled values, and the ones the edited catalog carries instead.
EDITS = {
    "ttft_budget_ms": ("1500", "2500"),
    "soak_utilization": ("0.85", "0.7"),
    "soak_seconds": ("120", "300"),
}


def _edited_catalog(cat: Catalog, dst: Path) -> Path:
    root = dst / "catalog"
    shutil.copytree(cat.root, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = root / "settings.yaml"
    text = path.read_text(encoding="utf-8")
    for field, (old, new) in EDITS.items():
        line = f"{field}: {old}\n"
        assert line in text, field
        text = text.replace(line, f"{field}: {new}\n")
    path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, cat: Catalog) -> tuple[Path, Catalog]:
    base = tmp_path_factory.mktemp("settings")
    root = _edited_catalog(cat, base)
    edited = load_catalog(root)
    assert edited.settings.ttft_budget_ms == 2500
    write_fixture(base / "sweep", COMBOS, edited)
    build_site(base / "sweep", base / "site", root)
    return base / "site", edited


def _text(html: str) -> str:
    """A page's words as a reader sees them: tags dropped, character references read."""
    return re.sub(r"\s+", " ", html_module.unescape(re.sub(r"<[^>]+>", " ", html)))


def _config_pages(site: Path) -> list[str]:
    pages = sorted(site.glob("gpu/*/*/*/*/index.html"))
    assert len(pages) == len(COMBOS)
    return [p.read_text(encoding="utf-8") for p in pages]


def test_config_pages_print_the_edited_rules(site):
    for html in _config_pages(site[0]):
        assert "TTFT breaks 2.5 s" in _text(html)
        # the soak rule's meaning, in the label's title
        assert "70 % or more occupied over the measured window (5.0 min" in html
        # and nothing of the bundled settings survives, in text or attributes
        for old in ("1.5 s", "1,500 ms", "85 %", "2.0 min"):
            assert old not in html


def test_the_breaking_chart_draws_the_edited_budget(site):
    for html in _config_pages(site[0]):
        found = re.search(
            r'<script type="application/json" id="bp-chart-data">(.*?)</script>',
            html,
            flags=re.DOTALL,
        )
        assert found, "no chart data on the page"
        data = json.loads(found.group(1))
        limits = [x for x in unpack(data["breaking"]["limits"]) if x["kind"] == "ttft"]
        assert limits == [{"kind": "ttft", "label": "TTFT budget 2.5 s", "ms": 2500.0}]


def test_the_methodology_page_prints_the_edited_settings(site):
    words = _text((site[0] / "methodology" / "index.html").read_text(encoding="utf-8"))
    assert "TTFT budget 2.5 s (99th percentile)" in words
    assert "70 % occupancy held over the measured window (up to 5.0 min)" in words
    assert "1.5 s" not in words
    assert "85 %" not in words


def test_the_verdicts_follow_the_edited_rules(site):
    rows = json.loads((site[0] / "api" / "configs.json").read_text(encoding="utf-8"))
    assert rows
    for item in rows:
        page = json.loads((site[0] / "api" / "configs" / f"{item['id']}.json").read_text())
        verdict = page["verdict"]
        assert "1.5 s" not in verdict
        assert "85 %" not in verdict
        if page["breaking_rule"] == "ttft":
            assert "the 2.5 s budget" in verdict


def test_the_kv_heuristic_is_printed_as_calibrated(tmp_path, cat, capsys):
    from backpressure.generator.cli.main import main

    root = tmp_path / "catalog"
    shutil.copytree(cat.root, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = root / "calibration.yaml"
    text = path.read_text(encoding="utf-8")
    assert "  value: 0.017\n" in text
    path.write_text(text.replace("  value: 0.017\n", "  value: 0.021\n", 1), encoding="utf-8")
    argv = ["estimate", "--vram-gb", "24", "--params-b", "7", "--quant", "q4_k_m"]
    assert main([*argv, "--context", "8k", "--catalog", str(root)]) == 0
    out = capsys.readouterr().out
    assert "(0.021 MiB/B heuristic)" in out  # the arithmetic
    assert "+10 KV cost from the 0.021 MiB/B heuristic" in out  # the band's reason
    assert "0.017" not in out
