"""Site search: one Pagefind bundle written beside the pages after they are built.

Pagefind splits its index into small content-addressed chunks, so a visitor
downloads only the chunks a query touches; the alternative, mkdocs-material's
lunr search, ships one index of every page before the first result. It indexes
the hub pages, the GPU x model pages (each with its headline numbers: how many
configs fit, the most slots, the highest breaking rate) and the hand-written
docs, not the config pages: there are tens of thousands of those, each reached
in one click from its GPU x model page, and indexing them cost most of the
index and a file per page. The bundle is recalled from the cache when no page
it reads changed.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from backpressure.generator.keys import digest, json_digest, package_versions
from backpressure.generator.site.pagefind_feed import FeedError, index_pages
from backpressure.generator.site.publish.assemble import SiteError

if TYPE_CHECKING:
    from backpressure.generator.site.publish.tree import Tree

DIR = "pagefind"  # every page but the configs: hubs, GPU x model pages, methodology, docs
OTHER_GLOB = "{*.html,*/index.html,*/*/index.html,*/*/*/index.html}"  # three folders deep at most
BODY, IGNORE = b"data-pagefind-body", b"data-pagefind-ignore"
FEED = "sorted files through the Python API"  # how bundles are made: part of their key


def index(site_dir: Path, pages: list[str], output: Path) -> None:
    """Index ``pages`` (site-relative, fed in sorted order) into a Pagefind bundle at ``output``.

    Pagefind's own directory walk meets files in the order the filesystem lists
    them (ext4 and tmpfs differ), and its index depends on that order; fed one by
    one, sorted (generator/site/pagefind_feed.py), the bundle is the same
    wherever the site is built.
    """
    try:
        index_pages(site_dir, pages, output)
    except (OSError, FeedError) as exc:
        raise SiteError(f"pagefind failed: {exc}") from exc
    if not (output / "pagefind.js").is_file():
        raise SiteError("pagefind wrote no index")


def _searchable(site_dir: Path, rel: str) -> bool:
    """A page Pagefind would index: it marks its searchable part (``data-pagefind-body``)."""
    return BODY in (site_dir / rel).read_bytes()


def is_other(rel: str) -> bool:
    """Whether ``rel`` is a page of the other bundle (what :data:`OTHER_GLOB` matches)."""
    parts = rel.split("/")
    if len(parts) == 1:
        return rel.endswith(".html")
    return len(parts) <= 4 and parts[-1] == "index.html"


def is_config(rel: str) -> bool:
    """Whether ``rel`` is a config page (``gpu/<gpu>/<model>/<quant>/<ctx>/``, maybe ``kv-*/``)."""
    parts = rel.split("/")
    return len(parts) >= 6 and parts[0] == "gpu" and parts[-1] == "index.html"


def place_index(tree: Tree) -> None:
    """The Pagefind bundle: from the cache when the pages it indexes are unchanged."""
    versions = json_digest(package_versions())
    # A cache file's name is its content key (or hash), so it stands for the page's bytes.
    pages = sorted(
        (rel, src.rpartition("/")[2])
        for rel, src in tree.wanted.items()
        if rel.endswith(".html") and is_other(rel)
    )
    _place(tree, DIR, is_other, digest(OTHER_GLOB, FEED, json_digest(pages), versions))


def _place(tree: Tree, folder: str, which: Callable[[str], bool], key: str) -> None:
    """One bundle into ``folder``: recalled under ``key``, or indexed anew and stored."""
    cache = tree.cache
    listed = cache.doc("pagefind", key) or []
    found = [(rel, path) for rel, sha in listed if (path := cache.stored(sha))]
    if listed and len(found) == len(listed):
        for rel, path in found:
            tree.place(f"{folder}/{rel}", path)
        return
    out = cache.scratch / folder
    pages = [
        rel
        for rel in sorted(tree.wanted)
        if rel.endswith(".html") and which(rel) and _searchable(tree.root, rel)
    ]
    try:
        index(tree.root, pages, out)
        made = tree.take(out, folder)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    start = len(folder) + 1
    cache.put_doc(
        "pagefind", key, [[rel[start:], tree.wanted[rel].rpartition("/")[2]] for rel in made]
    )
