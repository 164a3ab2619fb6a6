"""Site search: two Pagefind bundles written beside the pages after they are built.

Pagefind splits its index into small content-addressed chunks, so a visitor
downloads only the chunks a query touches; the alternative, mkdocs-material's
lunr search, ships one index of every page before the first result. The config
pages get a bundle of their own (``pagefind-configs/``, merged into every query
by ``search.js``): they are indexed by their names only, so after an edit that
moves numbers it is recalled from the cache and only the small bundle of the
other pages is indexed again.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from backpressure.generator.keys import digest, json_digest, package_versions
from backpressure.generator.site.pagefind_feed import FeedError, index_pages
from backpressure.generator.site.publish.assemble import SiteError

if TYPE_CHECKING:
    from backpressure.generator.site.publish.tree import Tree

DIR = "pagefind"  # every page but the configs: hubs, methodology, docs
CONFIG_DIR = "pagefind-configs"  # the config pages, merged into searches by search.js
CONFIG_GLOB = "gpu/*/*/*/*/index.html"  # gpu/<device>/<model>/<quant>/<context>/
OTHER_GLOB = "{*.html,*/index.html,*/*/index.html}"  # the rest, two folders deep at most
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
    return len(parts) <= 3 and parts[-1] == "index.html"


def is_config(rel: str) -> bool:
    """Whether ``rel`` is a config page (what :data:`CONFIG_GLOB` matches)."""
    parts = rel.split("/")
    return len(parts) == 6 and parts[0] == "gpu" and parts[-1] == "index.html"


def searched_text(page: bytes) -> bytes:
    """The part of a config page Pagefind reads: from its body mark to the first ignore.

    Config pages keep every number below that point, so this stays the same
    when an edit moves numbers only. A page without the marks counts whole.
    """
    start = page.find(BODY)
    end = page.find(IGNORE, start)
    return page if start < 0 or end < 0 else page[start:end]


def place_index(tree: Tree) -> None:
    """Both Pagefind bundles: each from the cache when what it indexes is unchanged.

    The config bundle is keyed by what Pagefind reads of each config page (names,
    not numbers), so an edit that moves numbers reuses it; the bundle of the
    other pages (about a hundred) is keyed by their bytes.
    """
    versions = json_digest(package_versions())
    # A cache file's name is its content key (or hash), so it stands for the page's bytes.
    pages = sorted(
        (rel, src.rpartition("/")[2]) for rel, src in tree.wanted.items() if rel.endswith(".html")
    )
    others = [p for p in pages if not is_config(p[0])]
    _place(tree, DIR, is_other, digest(OTHER_GLOB, FEED, json_digest(others), versions))
    configs = [p for p in pages if is_config(p[0])]
    texts = _texts_digest(tree, configs)
    _place(tree, CONFIG_DIR, is_config, digest(CONFIG_GLOB, FEED, texts, versions))


def _texts_digest(tree: Tree, configs: list[tuple[str, str]]) -> str:
    """Digest of what Pagefind reads of each config page, remembered per set of page bytes.

    Reading every config page costs most of a second; when no page's bytes
    changed (``configs`` pairs each page with its content key) the last digest holds.
    """
    known = json_digest(configs)
    remembered = tree.cache.doc("pagefind-text", known)
    if isinstance(remembered, str):
        return remembered
    texts = hashlib.sha256()
    for rel, _ in configs:
        texts.update(rel.encode() + b"\0")
        texts.update(searched_text(Path(tree.wanted[rel]).read_bytes()) + b"\0")
    tree.cache.put_doc("pagefind-text", known, texts.hexdigest())
    return texts.hexdigest()


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
