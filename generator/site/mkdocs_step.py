"""The mkdocs step: the hub pages, built by mkdocs, or recalled when their sources are unchanged.

Every build renders the hub pages' Markdown (cheap); mkdocs turns it into the
site's chrome and pages (seconds). Its output is a function of that Markdown,
the static assets, ``mkdocs.yml``, the theme's overrides and the installed
packages, so when none of those changed the output is taken from the render
cache instead, with the shells the config pages are wrapped in.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backpressure.generator.keys import depth, digest, files_digest, json_digest, package_versions
from backpressure.generator.paths import ROOT, TEMPLATES, WEB_RIG
from backpressure.generator.site import charts
from backpressure.generator.site.hubs import (
    gpu_context,
    gpu_index,
    home_context,
    model_context,
    model_index,
)
from backpressure.generator.site.methodology import methodology_context
from backpressure.generator.site.model import accuracy_context
from backpressure.generator.site.pages import Limits
from backpressure.generator.site.pair_pages import DEPTH as PAIR_DEPTH
from backpressure.generator.site.publish import assemble
from backpressure.generator.site.rank_page import rank_context
from backpressure.generator.site.scenarios import scenario_contexts
from jinja2 import Environment
from markupsafe import Markup

if TYPE_CHECKING:
    from backpressure.generator.site.model import SiteModel
    from backpressure.generator.site.publish.tree import Tree

HANDWRITTEN = ROOT / "docs"
SKIP = frozenset({"sitemap.xml", "sitemap.xml.gz"})  # dated: the build writes its own


def hub_pages(m: SiteModel) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(scratch path, template, context) of every mkdocs page."""
    yield "index.md", "pages/home.md.j2", home_context(m.cat, m.rows)
    yield "gpu/index.md", "pages/gpus.md.j2", {"devices": gpu_index(m.cat, m.by_gpu)}
    yield "model/index.md", "pages/models.md.j2", {"models": model_index(m.cat, m.by_model)}
    yield "methodology.md", "pages/methodology.md.j2", methodology_context(m.cat)
    accuracy = m.accuracy if m.accuracy is not None else accuracy_context(m.cat)
    yield "accuracy.md", "pages/accuracy.md.j2", accuracy
    yield "search.md", "pages/search.md.j2", {}
    yield "compare.md", "pages/compare.md.j2", {}
    scenarios = m.scenarios
    if scenarios is None:
        scenarios = scenario_contexts(m.cat.root / "scenarios", cat=m.cat)
    yield "scenario/index.md", "pages/scenarios.md.j2", {"scenarios": scenarios}
    for sc in scenarios:
        yield f"scenario/{sc['id']}.md", "pages/scenario.md.j2", sc
    yield "rig.md", "pages/rig.md.j2", rig_context(m)
    for d in m.cat.devices():
        if d in m.by_gpu:
            yield (
                f"gpu/{d}.md",
                "pages/gpu.md.j2",
                gpu_context(m.cat, d, m.by_gpu[d], frozenset(m.by_gpu)),
            )
    for mid in m.cat.models:
        if mid in m.by_model:
            yield f"model/{mid}.md", "pages/model.md.j2", model_context(m.cat, mid, m.by_model[mid])
            ctx = rank_context(m.cat, mid, m.model_configs[mid], Limits.of(m.cat))
            yield f"model/{mid}/rank.md", "pages/rank.md.j2", ctx


def rig_context(m: SiteModel) -> dict[str, Any]:
    """The rig builder page: its data files (computed in gather) and what they weigh."""
    from backpressure.generator.rig.data import rig_files
    from backpressure.generator.rig.page import page_context

    files = m.rig if m.rig is not None else rig_files(m.cat, m.rows)
    index = json.loads(files["rig/data/index.json"])
    return page_context(files, WEB_RIG, index.get("default_config"))


def _shell_page(env: Environment, depth: int) -> str:
    # The marks are our own plain words, replaced after the build: passed as markup,
    # they reach the page exactly as written.
    return env.get_template("pages/shell.md.j2").render(
        title=Markup(assemble.TITLE_MARK),
        description=Markup(assemble.DESC_MARK),
        marker=Markup(assemble.BODY_MARK),
    )


def write_docs(
    env: Environment,
    m: SiteModel,
    w: assemble.Writer,
    depths: set[int],
    templates: Path = TEMPLATES,
) -> None:
    """Render every mkdocs page, the shells and the static assets into the scratch docs dir."""
    for rel, template, ctx in hub_pages(m):
        w.write(rel, env.get_template(template).render(**ctx))
    for d in sorted(depths):
        w.write(assemble.shell_rel(d) + ".md", _shell_page(env, d))
    w.copy_tree(templates / "assets", "assets")
    w.copy_tree(WEB_RIG, "assets/rig")
    specs = json.dumps(charts.chart_specs(), sort_keys=True, separators=(",", ":"))
    w.write("assets/bp/specs.js", f"window.BP_SPECS={specs};\n")
    if HANDWRITTEN.is_dir():
        w.copy_tree(HANDWRITTEN, "")


def hubs(
    env: Environment, m: SiteModel, tree: Tree, config_file: Path, templates: Path
) -> tuple[dict[int, assemble.Shell], list[str]]:
    """Hub pages into the tree; returns the shells by depth and the hub pages' URLs."""
    depths = {depth(r.permalink) for r in m.rows} | {PAIR_DEPTH}
    cache = tree.cache
    docs, built = cache.scratch / "docs", cache.scratch / "mkdocs"
    try:
        write_docs(env, m, assemble.Writer(docs), depths, templates)
        key = _key(docs, config_file)
        shells = _recall(tree, key, depths)
        if shells is None:
            assemble.mkdocs_build(config_file, docs, built)
            shells = {d: assemble.read_shell(built, d) for d in depths}
            assemble.drop_shells(built)
            for name in SKIP:
                (built / name).unlink(missing_ok=True)
            placed = tree.take(built, "")
            record = {
                "files": [[rel, _name(tree.wanted[rel])] for rel in placed],
                "shells": {
                    str(d): [
                        _name(cache.blob(sh.head.encode())),
                        _name(cache.blob(sh.tail.encode())),
                    ]
                    for d, sh in shells.items()
                },
            }
            cache.put_doc("mkdocs", key, record)
    finally:
        shutil.rmtree(docs, ignore_errors=True)
        shutil.rmtree(built, ignore_errors=True)
    urls = [f.removesuffix("index.html") for f in tree.wanted if f.endswith("index.html")]
    return shells, urls


def _name(path: str) -> str:
    return path.rpartition("/")[2]


def _key(docs: Path, config_file: Path) -> str:
    """Hash of everything mkdocs' output depends on, and the code that cuts shells from it."""
    from mkdocs.config import load_config

    custom = load_config(config_file=str(config_file)).theme.custom_dir
    overrides = Path(custom) if custom else None
    shell_code = Path(assemble.__file__)
    return digest(
        files_digest([p for p in docs.rglob("*") if p.is_file()], docs),
        files_digest([shell_code], shell_code.parent),
        files_digest([config_file], config_file.parent),
        files_digest([p for p in overrides.rglob("*") if p.is_file()], overrides)
        if overrides
        else "",
        json_digest(package_versions()),
    )


def _recall(tree: Tree, key: str, depths: set[int]) -> dict[int, assemble.Shell] | None:
    """Place a stored mkdocs output and return its shells; None if it is not all there."""
    cache = tree.cache
    record = cache.doc("mkdocs", key)
    if not isinstance(record, dict) or set(record.get("shells", {})) != {str(d) for d in depths}:
        return None
    files = [(rel, cache.stored(sha)) for rel, sha in record.get("files", [])]
    halves = [(int(d), cache.stored(h), cache.stored(t)) for d, (h, t) in record["shells"].items()]
    placed = [(rel, path) for rel, path in files if path]
    shells = {
        d: assemble.Shell(Path(h).read_text(encoding="utf-8"), Path(t).read_text(encoding="utf-8"))
        for d, h, t in halves
        if h and t
    }
    if len(placed) < len(files) or len(shells) < len(halves):
        return None
    for rel, path in placed:
        tree.place(rel, path)
    return shells
