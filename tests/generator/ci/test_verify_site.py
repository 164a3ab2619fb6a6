"""`verify SITE_DIR` recomputes every config and compares every file a reader sees of it.

A real (tiny) sweep and build, then one tamper per test on a copy of the site:
any changed number (in the page, the badge, a hub cell, the anchored row on the
GPU x model page, the model's JSON), a type change (85 -> 85.0, true -> 1) or
a duplicate key is exit 1 naming the file; a file that cannot be read is exit 2.
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
MODEL_JSON = "api/models/llama-3.1-8b.json"
PAIR = "gpu/rtx-4090/qwen3-30b-a3b/index.html"


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


def test_the_model_json_round_trips_through_verify(built, capsys):
    site, catalog = built
    code, out = run(capsys, str(site / MODEL_JSON), "--catalog", str(catalog))
    assert code == 0, out
    n = len(json.loads((site / MODEL_JSON).read_text(encoding="utf-8"))["configs"])
    assert out.startswith(f"verified: all {n} configs match")
    for target in (
        NOFIT,
        "gpu/rtx-4090/qwen3-30b-a3b/#bf16-8k",
        "gpu/rtx-4090/qwen3-30b-a3b/bf16/8k/",
    ):
        code, out = run(capsys, target, "--site", str(site), "--catalog", str(catalog))
        assert code == 0, (target, out)
        assert f"verified: {NOFIT} matches" in out


def edit_line(path: Path, cid: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the line of ``cid`` only."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    i = next(k for k, ln in enumerate(lines) if f'"id":"{cid}"' in ln)
    assert old in lines[i], (old, lines[i])
    lines[i] = lines[i].replace(old, new, 1)
    path.write_text("".join(lines), encoding="utf-8")


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
    edit(badge, "breaks at ", "breaks at 1")
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


def _json_slots(root: Path) -> int:
    line = next(
        ln for ln in (root / MODEL_JSON).read_text(encoding="utf-8").splitlines() if CID in ln
    )
    m = re.search(r'"slots":(\d+)', line)
    assert m
    return int(m.group(1))


def test_a_changed_model_json_line(site, capsys):
    root, catalog = site
    slots = _json_slots(root)
    edit_line(root / MODEL_JSON, CID, f'"slots":{slots}', f'"slots":{slots + 1}')
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 1
    assert f"{MODEL_JSON}: {CID}: 1 field(s) differ: slots: published {slots + 1}" in out


@pytest.mark.parametrize(
    ("old", "new"),
    [('"configs":', '"configs":1'), ('"fits":', '"fits":1'), ('"name":"', '"name":"x')],
)
def test_a_changed_model_index(site, capsys, old, new):
    # api/models.json indexes the model files: its counts, names and links must be theirs
    root, catalog = site
    edit(root / "api" / "models.json", old, new)
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 1
    assert "api/models.json: " in out
    assert "first difference" in out


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ('"slots":{n}', '"slots":{m}', "slots: published {m}, recomputed {n}"),
        ('"slots":{n}', '"slots":{n}.0', "slots: published {n}.0, recomputed {n}"),
        ('"fits":true', '"fits":1', "fits: published 1, recomputed true"),
        ('"slots":{n},', '"slots":{n},"slots":{n},', "tampered: key 'slots' given twice"),
        ('"slots":{n},', '"slots":{n}, ', "first difference"),  # same data, other bytes
    ],
)
def test_tampered_json_is_a_mismatch(site, capsys, old, new, what):
    root, catalog = site
    n = _json_slots(root)
    fill = {"n": n, "m": n + 1}
    edit_line(root / MODEL_JSON, CID, old.format(**fill), new.format(**fill))
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 1, out
    assert f"{MODEL_JSON}: {CID}" in out
    assert what.format(**fill) in out


def test_type_changes_in_a_json_file_alone(site, capsys):
    root, catalog = site
    path = root / MODEL_JSON
    edit_line(path, CID, '"fits":true', '"fits":1')
    code, out = run(capsys, str(path), "--catalog", str(catalog))
    assert code == 1
    assert f"{CID}: fits" in out


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing", "reflowed"])
def test_a_file_that_cannot_be_read_is_exit_2(site, capsys, damage):
    root, catalog = site
    path = root / MODEL_JSON
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "garbage":
        path.write_bytes(b"\xff\xfe not json")
    elif damage == "reflowed":  # the same data, not in the site's frame
        path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")), indent=1))
    else:
        path.unlink()
    code, out = run(capsys, str(root), "--catalog", str(catalog))
    assert code == 2
    assert out.count("\n") == 1
    assert "llama-3.1-8b.json" in out


@pytest.mark.parametrize("whole", [False, True])
def test_a_site_without_its_model_index_is_exit_2(site, capsys, whole):
    root, catalog = site
    (root / "api" / "models.json").unlink()
    target = [str(root)] if whole else [CID, "--site", str(root)]
    code, out = run(capsys, *target, "--catalog", str(catalog))
    assert code == 2
    assert "api/models.json" in out


def test_a_non_fitting_config_is_checked_by_its_anchored_row(site, capsys):
    root, catalog = site
    assert not (root / "gpu/rtx-4090/qwen3-30b-a3b/bf16/8k").exists()
    text = (root / PAIR).read_text(encoding="utf-8")
    start = text.index('<tr id="bf16-8k"')
    row = text[start : text.index("</tr>", start)]
    m = re.search(r"<td>(\d+)</td>", row)  # its slots
    assert m
    fake = row.replace(m.group(0), f"<td>{int(m.group(1)) + 5}</td>", 1)
    (root / PAIR).write_text(text.replace(row, fake), encoding="utf-8")
    code, out = run(capsys, NOFIT, "--site", str(root), "--catalog", str(catalog))
    assert code == 1
    assert f"{PAIR}: {NOFIT}: its row is not" in out


def test_a_page_for_a_config_that_does_not_fit_is_a_mismatch(site, capsys):
    root, catalog = site
    stale = root / "gpu/rtx-4090/qwen3-30b-a3b/bf16/8k"
    stale.mkdir(parents=True)
    (stale / "index.html").write_text("<p>fits!</p>", encoding="utf-8")
    code, out = run(capsys, NOFIT, "--site", str(root), "--catalog", str(catalog))
    assert code == 1
    assert "does not fit, yet has a page or badge" in out
