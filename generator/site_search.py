"""Site search: a Pagefind index written beside the pages after they are built.

Pagefind splits its index into small content-addressed chunks, so a visitor
downloads only the chunks a query touches; the alternative, mkdocs-material's
lunr search, ships one index of every page before the first result.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from generator.assemble import SiteError
from generator.site_keys import digest, json_digest, package_versions

if TYPE_CHECKING:
    from generator.site_tree import Tree

DIR = "pagefind"


def index(site_dir: Path, output: Path | None = None) -> None:
    """Index every page of ``site_dir`` that carries ``data-pagefind-body``.

    The bundle goes to ``site_dir/pagefind``, or to ``output`` if given.
    """
    cmd = [sys.executable, "-m", "pagefind", "--site", str(site_dir), "--silent"]
    if output is not None:
        cmd += ["--output-path", str(output.resolve())]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise SiteError(f"cannot run pagefind: {exc}") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SiteError("pagefind failed: " + " / ".join(detail or ["no output"]))
    if not ((output or site_dir / DIR) / "pagefind.js").is_file():
        raise SiteError("pagefind wrote no index")


def place_index(tree: Tree) -> None:
    """Pagefind's index: from the cache when no page it reads has changed, else indexed anew."""
    cache = tree.cache
    # A cache file's name is its content key (or hash), so it stands for the page's bytes.
    pages = sorted(
        (rel, src.rpartition("/")[2]) for rel, src in tree.wanted.items() if rel.endswith(".html")
    )
    key = digest(json_digest(pages), json_digest(package_versions()))
    listed = cache.doc("pagefind", key) or []
    found = [(rel, path) for rel, sha in listed if (path := cache.stored(sha))]
    if listed and len(found) == len(listed):
        for rel, path in found:
            tree.place(f"{DIR}/{rel}", path)
        return
    out = cache.scratch / DIR
    try:
        index(tree.root, out)
        made = tree.take(out, DIR)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    start = len(DIR) + 1
    cache.put_doc(
        "pagefind", key, [[rel[start:], tree.wanted[rel].rpartition("/")[2]] for rel in made]
    )
