"""Every kind of file a build keeps between runs, truncated or with a byte flipped.

Each time the next build says so on stderr, makes the damaged content again,
publishes exactly the site a clean build makes, and ``verify`` passes. (The
site's files are hard links into the render cache, so damage to a cache file
is damage to the published site too: the copies keep the links.)
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from backpressure.generator.cli.main import main

from tests.tiny_catalog import make_tiny_catalog

PAGE = "gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/index.html"


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A tiny catalog swept and built for real, and the clean build to compare with."""
    base = tmp_path_factory.mktemp("damage")
    catalog = make_tiny_catalog(base)
    assert main(["build", "--catalog", str(catalog), "--out", str(base / "work" / "site")]) == 0
    clean = base / "clean"
    assert main(["build", "--catalog", str(catalog), "--out", str(clean / "site")]) == 0
    return base / "work", catalog, tree(clean / "site")


@pytest.fixture
def work(built, tmp_path):
    src, catalog, reference = built
    dst = tmp_path / "work"
    # cp -a keeps the hard links between the site and its cache
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst, catalog, reference


def _cache_file_of(work: Path, rel: str) -> Path:
    ino = (work / "site" / rel).stat().st_ino
    return next(p for p in (work / "site.cache" / "files").rglob("*") if p.stat().st_ino == ino)


def _target(work: Path, kind: str) -> Path:
    cache, sweep = work / "site.cache", work / "site.sweep"
    docs = sorted((cache / "docs").glob("*.json"))
    return {
        "page": lambda: _cache_file_of(work, PAGE),
        "badge": lambda: _cache_file_of(work, PAGE.replace("index.html", "badge.svg")),
        "model json": lambda: _cache_file_of(work, "api/models/llama-3.1-8b.json"),
        "gpu x model page": lambda: _cache_file_of(work, "gpu/rtx-4090/llama-3.1-8b/index.html"),
        "hub page": lambda: _cache_file_of(work, "gpu/rtx-4090/index.html"),
        "asset": lambda: _cache_file_of(work, "assets/bp/bp.js"),
        "search index": lambda: _cache_file_of(
            work,
            next((work / "site").glob("pagefind/fragment/*")).relative_to(work / "site").as_posix(),
        ),
        "scenario doc": lambda: next(p for p in docs if p.name.startswith("scenario-")),
        "pagefind doc": lambda: next(
            p for p in docs if p.name.startswith("pagefind-") and "text" not in p.name
        ),
        "mkdocs doc": lambda: next(p for p in docs if p.name.startswith("mkdocs-")),
        "cache index": lambda: cache / "index.json",
        "cache format": lambda: cache / "FORMAT",
        "results.csv": lambda: sweep / "results.csv",
        "curves.jsonl": lambda: sweep / "curves.jsonl",
        "inputs.json": lambda: sweep / "inputs.json",
        "sweep manifest": lambda: sweep / "manifest.json",
    }[kind]()


def _damage(path: Path, how: str) -> None:
    raw = path.read_bytes()
    assert raw, path
    path.chmod(0o644)  # the cache keeps its files read-only; damage does not ask
    if how == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    else:
        with path.open("r+b") as fh:  # in place: the inode (and every link to it) is hit
            fh.seek(len(raw) // 2)
            fh.write(bytes([raw[len(raw) // 2] ^ 0x20]))


KINDS = [
    "page",
    "badge",
    "model json",
    "gpu x model page",
    "hub page",
    "asset",
    "search index",
    "scenario doc",
    "pagefind doc",
    "mkdocs doc",
    "cache index",
    "cache format",
    "results.csv",
    "curves.jsonl",
    "inputs.json",
    "sweep manifest",
]


# Flipping is the slower half (two builds and a verify per kind): it runs with -m slow.
@pytest.mark.parametrize("how", ["truncate", pytest.param("flip", marks=pytest.mark.slow)])
@pytest.mark.parametrize("kind", KINDS)
def test_damage_is_found_said_and_made_again(work, capsys, kind, how):
    root, catalog, reference = work
    target = _target(root, kind)
    _damage(target, how)
    code = main(["build", "--catalog", str(catalog), "--out", str(root / "site")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    assert "backpressure: note:" in err, f"the damage to {target.name} went unsaid"
    assert tree(root / "site") == reference
    assert main(["verify", str(root / "site"), "--catalog", str(catalog)]) == 0, capsys.readouterr()
    # and the build after that finds nothing more to say
    assert main(["build", "--catalog", str(catalog), "--out", str(root / "site")]) == 0
    assert "note:" not in capsys.readouterr().err


def test_full_rebuilds_from_nothing(work, capsys):
    root, catalog, reference = work
    code = main(["build", "--catalog", str(catalog), "--out", str(root / "site"), "--full"])
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"16 configs \((\d+) rendered\)", out)  # those that fit
    paged = len(list((root / "site").glob("gpu/*/*/*/*/index.html")))
    assert f"16 configs ({paged} rendered)" in out
    assert 0 < paged < 16
    assert tree(root / "site") == reference
