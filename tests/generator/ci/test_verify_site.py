"""`verify SITE_DIR` recomputes every config and compares every file a reader sees of it.

A real (tiny) sweep and build, then one tamper per test on a copy of the site:
any changed number (in the page, the badge, a hub cell, the index, the JSON),
a type change (85 -> 85.0, true -> 1) or a duplicate key is exit 1 naming the
file; a file that cannot be read is exit 2.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from backpressure.generator.cli.main import main

from tests.tiny_catalog import make_tiny_catalog

CID = "rtx-4090--llama-3.1-8b--q4_k_m--8k"
PAGE = "gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/index.html"
NOFIT = "rtx-4090--qwen3-30b-a3b--bf16--8k"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("verify")
    catalog = make_tiny_catalog(base)
    assert main(["build", "--catalog", str(catalog), "--out", str(base / "site")]) == 0
    return base / "site", catalog


@pytest.fixture
def site(built, tmp_path):
    """A private copy (no hard links into the cache), free to tamper with."""
    src, catalog = built
    dst = tmp_path / "site"
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    return dst, catalog


def run(capsys, *args):
    code = main(["verify", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def test_an_untouched_site_verifies_whole_and_sampled(built, capsys):
    site, catalog = built
    code, out = run(capsys, str(site), "--catalog", str(catalog))
    assert code == 0, out
    assert out.startswith("verified: all 16 configs match")
    code, out = run(capsys, str(site), "--catalog", str(catalog), "--sample", "3", "--seed", "7")
    assert code == 0, out
    assert "a sample of 3 configs" in out
    code, out = run(capsys, CID, "--site", str(site), "--catalog", str(catalog))
    assert code == 0, out


def _slots_in_page(page: Path) -> str:
    m = re.search(
        r"<td>KV slots \(worst case\)</td><td>(\d+)</td>", page.read_text(encoding="utf-8")
    )
    assert m
    return m.group(1)


def test_a_number_changed_in_the_page_html(site, capsys):
    root, catalog = site
    slots = _slots_in_page(root / PAGE)
    edit(
        root / PAGE,
        f"<td>KV slots (worst case)</td><td>{slots}</td>",
        f"<td>KV slots (worst case)</td><td>{int(slots) + 1}</td>",
    )
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 1
    assert f"{PAGE}: page differs" in out


def test_a_number_changed_in_the_chart_data(site, capsys):
    root, catalog = site
    page = root / PAGE
    text = page.read_text(encoding="utf-8")
    start = text.index('id="bp-chart-data">')
    m = re.compile(r"\d\.\d+").search(text, start)
    assert m
    page.write_text(text[: m.start()] + "9" + text[m.start() + 1 :], encoding="utf-8")
    code, out = run(capsys, CID, "--site", str(root), "--catalog", str(catalog))
    assert code == 1
    assert "page differs" in out


def test_a_changed_badge(site, capsys):
    root, catalog = site
    badge = root / "gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/badge.svg"
    edit(badge, " rps", "0 rps")
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 1
    assert "badge.svg: badge differs" in out


@pytest.mark.parametrize(
    "hub", ["gpu/rtx-4090/index.html", "model/llama-3.1-8b/index.html", "index.html"]
)
def test_a_changed_hub_cell(site, capsys, hub):
    root, catalog = site
    link = f'href="{"" if hub == "index.html" else "../../"}gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/">'
    text = (root / hub).read_text(encoding="utf-8")
    at = text.index(link) + len(link)
    (root / hub).write_text(text[:at] + "1" + text[at:], encoding="utf-8")
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 1
    assert f"{hub}: {CID}: its cell is not" in out


def test_a_changed_index_line(site, capsys):
    root, catalog = site
    index = root / "api" / "configs.json"
    lines = index.read_text(encoding="utf-8").splitlines(keepends=True)
    i = next(k for k, ln in enumerate(lines) if f'"id":"{CID}"' in ln)
    lines[i] = re.sub(r'"slots":(\d+)', lambda m: f'"slots":{int(m.group(1)) + 1}', lines[i])
    index.write_text("".join(lines), encoding="utf-8")
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 1
    assert f"api/configs.json: {CID}: first difference" in out


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ('"slots": 17', '"slots": 18', "slots: published 18, recomputed 17"),
        ('"slots": 17', '"slots": 17.0', "slots: published 17.0, recomputed 17"),
        ('"fits": true', '"fits": 1', "fits: published 1, recomputed true"),
        ('"slots": 17,', '"slots": 17,\n "slots": 17,', "tampered: key 'slots' given twice"),
    ],
)
def test_tampered_json_is_a_mismatch(site, capsys, old, new, what):
    root, catalog = site
    path = root / "api" / "configs" / f"{CID}.json"
    edit(path, old, new)
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 1
    assert f"api/configs/{CID}.json" in out
    assert what in out


def test_type_changes_in_a_json_file_alone(site, capsys):
    root, catalog = site
    path = root / "api" / "configs" / f"{CID}.json"
    edit(path, '"fits": true', '"fits": 1')
    code, out = run(capsys, str(path), "--catalog", str(catalog))
    assert code == 1
    assert "fits" in out


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing"])
def test_a_file_that_cannot_be_read_is_exit_2(site, capsys, damage):
    root, catalog = site
    path = root / "api" / "configs" / f"{CID}.json"
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "garbage":
        path.write_bytes(b"\xff\xfe not json")
    else:
        path.unlink()
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 2
    assert out.count("\n") == 1
    assert f"{CID}.json" in out


def test_a_corrupt_index_is_exit_2(site, capsys):
    root, catalog = site
    (root / "api" / "configs.json").write_text("[\n{broken\n]\n")
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 2
    assert "api/configs.json" in out


def test_a_non_fitting_page_lists_its_nearest_fits_as_recomputed(site, capsys):
    root, catalog = site
    page = root / "gpu/rtx-4090/qwen3-30b-a3b/bf16/8k/index.html"
    text = page.read_text(encoding="utf-8")
    assert "Nearest configs that do fit" in text
    m = re.search(r"; (\d+) requests at once</li>", text)
    assert m
    page.write_text(
        text.replace(m.group(0), m.group(0).replace(m.group(1), "999")), encoding="utf-8"
    )
    code, out = run(capsys, NOFIT, "--site", str(root), "--catalog", str(catalog))
    assert code == 1
    assert "page differs" in out
    assert json.loads((root / "api" / "configs.json").read_text())  # the index is untouched
