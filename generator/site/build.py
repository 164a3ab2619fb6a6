"""Build the published site from the sweep's tables and the catalog, incrementally.

Two phases. Gather: read ``results.csv`` and ``curves.jsonl``, group the rows,
work out every config's nearest fits, run (or recall) the scenario pages.
Write, into the workspace ``<out>.tmp`` (the tree of an earlier build, brought
up to date in place: generator/site_tree.py): render the hub pages and build
them with mkdocs (strict) unless their sources did not change
(generator/site_mkdocs.py); key every config page by what its bytes depend on
(generator/site_keys.py), render the configs whose key the render cache
(``<out>.cache``, generator/site_cache.py) lacks and hard-link the rest from it
(generator/site_configs.py) for the configs that fit, and a page per GPU x
model holding every config's anchored row (generator/site/pair_pages.py);
write the per-model JSON indexes (generator/site/model_api.py); index with Pagefind unless
no page it reads changed; validate every relative link; then swap the
workspace in for ``<out>``. A failure anywhere leaves ``<out>`` as it was.

After an edit to one catalog entry only the config pages it affects are
rendered, and only files whose bytes change are written (those pages, the hub
pages that show them, the indexes); every other file keeps its inode. The hub
pages' Markdown is cheap and always rendered; mkdocs, when it must run, turns
all of it into HTML.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from backpressure.catalog.loader import load_catalog
from backpressure.generator import keys as site_keys
from backpressure.generator.paths import MKDOCS_YML, TEMPLATES
from backpressure.generator.site import charts, gate
from backpressure.generator.site import mkdocs_step as site_mkdocs
from backpressure.generator.site import search as site_search
from backpressure.generator.site.configs import write_configs
from backpressure.generator.site.links import has_page, pair_dir
from backpressure.generator.site.model import SiteModel, gather
from backpressure.generator.site.model_api import INDEX as MODELS_INDEX
from backpressure.generator.site.model_api import index_json, model_file, model_json
from backpressure.generator.site.pages import Limits, device_name, page_path
from backpressure.generator.site.pair_pages import DEPTH as PAIR_DEPTH
from backpressure.generator.site.pair_pages import write_pairs
from backpressure.generator.site.publish import assemble, guard
from backpressure.generator.site.publish import tree as site_tree
from backpressure.generator.site.publish.cache import RenderCache
from backpressure.generator.site.publish.tree import Tree
from backpressure.generator.site.render import make_env
from jinja2 import Environment


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What a build wrote, what it re-rendered, what changed, and where the time went."""

    out: Path
    configs: int
    pages: int
    html_bytes: int
    files: int
    rendered: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    phases: tuple[tuple[str, float], ...] = ()
    cpu: tuple[tuple[str, float], ...] = ()
    total_bytes: int = 0


def validate(m: SiteModel, files: set[str], site: Path, known: dict[str, list[str]]) -> None:
    """Every page, badge and JSON index the design promises is there; no relative link is broken.

    A config that fits has its page and badge; one that does not has none (its
    permalink is left to ``404.html``); every config's GPU x model page and
    model JSON are there. ``known`` holds the links of pages that need not be
    read again (the config pages: their shell's links plus their body's, kept
    in the render cache).
    """
    expected = {page_path(pair_dir(r.gpu, r.model)) for r in m.rows}
    expected |= {model_file(r.model) for r in m.rows} | {"404.html"}
    for r in m.rows:
        if has_page(r):
            expected |= {page_path(r.permalink), r.permalink + "badge.svg"}
    missing = sorted(expected - files)
    missing += [r.permalink for r in m.rows if not has_page(r) and page_path(r.permalink) in files]
    if missing:
        raise assemble.SiteError(f"{len(missing)} expected files missing, e.g. {missing[:3]}")

    def pages() -> Iterator[tuple[str, list[str]]]:
        for page in sorted(f for f in files if f.endswith(".html")):
            if page in known:
                yield page, known[page]
            else:
                yield page, assemble.page_links((site / page).read_text(encoding="utf-8"))

    bad = assemble.check_links(pages(), files)
    if bad:
        raise assemble.SiteError("broken links:\n  " + "\n  ".join(bad))


class _Clock:
    """Seconds spent per phase of the build: wall clock, and CPU (this process and its children)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.last, self.last_cpu = time.perf_counter(), _cpu()

    def lap(self, name: str) -> None:
        """Charge the time since the last lap to ``name``."""
        now, cpu = time.perf_counter(), _cpu()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu - self.last_cpu
        self.last, self.last_cpu = now, cpu


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _write_site(
    env: Environment, m: SiteModel, tree: Tree, config_file: Path, templates: Path, clock: _Clock
) -> tuple[tuple[str, ...], dict[str, list[str]]]:
    """Phase two: mkdocs for the hubs, then config pages (from the cache where it can), search.

    Returns the configs rendered and every config page's links.
    """
    shells, urls = site_mkdocs.hubs(env, m, tree, config_file, templates)
    clock.lap("mkdocs")
    version = site_keys.site_version(templates, charts.chart_specs())
    ent = site_keys.entities(m.cat)
    lim = Limits.of(m.cat)
    base = {
        d: site_keys.digest(version, sh.head, sh.tail, m.site_url, repr(lim), ent.shared)
        for d, sh in shells.items()
    }
    paged = [r for r in m.rows if has_page(r)]
    sib = {r.config_id: m.siblings.key(r, lambda d: device_name(m.cat, d)) for r in paged}
    keys = site_keys.config_keys(paged, m.curve_texts(), m.nearest, ent, base, sib)
    written = write_configs(env, m, tree, shells, keys, lim)
    pairs = write_pairs(env, m, tree, shells[PAIR_DEPTH])
    for mid, configs in m.model_configs.items():
        tree.write(model_file(mid), model_json(m.cat, mid, configs))
    tree.write(MODELS_INDEX, index_json(m.cat, m.by_model, m.site_url))
    for rel, text in (m.rig or {}).items():  # the rig builder's catalog data
        tree.write(rel, text)
    listed = urls + [r.permalink for r in paged] + [p.removesuffix("index.html") for p in pairs]
    for name, data in assemble.sitemap(m.site_url, listed).items():
        tree.write(name, data)
    known = _config_links(m, shells, {r.config_id: written.links[keys[r.config_id]] for r in paged})
    # Pagefind reads every HTML file in the tree: none may be left from an older build.
    tree.sweep(lambda rel: rel.endswith(".html"))
    clock.lap("configs")
    site_search.place_index(tree)
    tree.sweep()
    clock.lap("pagefind")
    return written.rendered, known


def _config_links(
    m: SiteModel, shells: dict[int, assemble.Shell], body: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Every config page's links, the shell's that climb to the root listed on one page only.

    A link that climbs to the root resolves the same from every page as deep,
    so checking it once per depth checks it everywhere.
    """
    once: dict[int, list[str]] = {}
    each: dict[int, list[str]] = {}
    for d, sh in shells.items():
        links = assemble.page_links(sh.head + sh.tail)
        once[d] = [t for t in links if t.startswith("../" * d)]
        each[d] = [t for t in links if not t.startswith("../" * d)]
    known = {}
    for r in m.rows:
        if not has_page(r):
            continue
        d = site_keys.depth(r.permalink)
        known[page_path(r.permalink)] = each[d] + body[r.config_id] + once.pop(d, [])
    return known


def build_site(
    results_dir: Path,
    out: Path,
    catalog_dir: Path | None = None,
    config_file: Path = MKDOCS_YML,
    check_links: bool = True,
    *,
    full: bool = False,
    templates: Path = TEMPLATES,
) -> BuildReport:
    """Build the site into ``out``, re-rendering only what changed; a failure leaves ``out`` as is.

    ``full`` ignores what the render cache (``<out>.cache``) holds and renders
    every page afresh, refilling it.
    """
    # mkdocs resolves relative paths against mkdocs.yml, not the working directory.
    out = out.resolve()
    with guard.build_lock(out):
        guard.check_outputs(out)
        return _build(results_dir, out, catalog_dir, config_file, check_links, full, templates)


def _build(
    results_dir: Path,
    out: Path,
    catalog_dir: Path | None,
    config_file: Path,
    check_links: bool,
    full: bool,
    templates: Path,
) -> BuildReport:
    from mkdocs.config import load_config

    clock = _Clock()
    site_url = load_config(config_file=str(config_file)).site_url or ""
    cache = RenderCache(guard.sibling(out, "cache"), reuse=not full)
    m = gather(load_catalog(catalog_dir), results_dir, site_url, cache)
    gate.check_rows(m.rows)
    env = make_env(templates)
    clock.lap("gather")
    tmp = site_tree.workspace(out)
    try:
        tree = Tree(tmp, cache)
        site_tree.mark(tree)
        rendered, known = _write_site(env, m, tree, config_file, templates, clock)
        files = set(tree.wanted)
        if check_links:
            validate(m, files, tmp, known)
        clock.lap("validate")
        diff = site_tree.changes(tree, out)
        clock.lap("compare")
    except BaseException:
        site_tree.shelve(tmp, out)
        with contextlib.suppress(OSError):  # a full disk must not hide the first error
            cache.save_index(everything=True)  # what was rendered stays valid
        cache.report_damage()
        raise
    html = [f for f in files if f.endswith(".html")]
    sizes = {f: (tmp / f).stat().st_size for f in files}  # one stat a file
    html_bytes = sum(sizes[f] for f in html)
    total_bytes = sum(sizes.values())
    site_tree.publish(tmp, out)
    cache.save_index()
    cache.prune()
    cache.empty_trash()
    cache.report_damage()
    clock.lap("publish")
    return BuildReport(
        out,
        len(m.rows),
        len(html),
        html_bytes,
        len(files),
        rendered,
        diff.changed,
        diff.removed,
        tuple(clock.phases.items()),
        tuple(clock.cpu.items()),
        total_bytes,
    )
