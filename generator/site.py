"""Build the published site from the sweep's tables and the catalog.

Two phases. Gather: read ``results.csv`` and ``curves.jsonl``, group the rows,
work out every hub page. Write: render the hub pages into a scratch docs
directory and build them with mkdocs (strict) into ``<out>.tmp``; write each
config page into the same chrome directly (no Markdown to parse, one template
render each; benchmarks/bench_site.py compares it with an all-mkdocs build);
write the JSON API and the search index; validate every relative link; then
swap ``<out>.tmp`` over ``<out>``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment

from catalog.loader import Catalog, load_catalog
from generator import assemble, charts, site_search
from generator.pages import config_context, page_path
from generator.records import Curves, ResultRow
from generator.render import TEMPLATES, make_env
from generator.results_io import read_curves, read_results, row_json
from generator.site_hubs import (
    break_rps,
    gpu_context,
    gpu_index,
    home_context,
    model_context,
    model_index,
)
from generator.site_methodology import methodology_context, slo_ms
from generator.site_scenarios import scenario_contexts
from generator.site_svg import badge, fallbacks

ROOT = TEMPLATES.parent
MKDOCS_YML = ROOT / "mkdocs.yml"
HANDWRITTEN = ROOT / "docs"
SUMMARY_FIELDS = (
    "error_band_pct",
    "effective_concurrency",
    "binding_ceiling",
    "kv_dtype",
    *(
        f"{k}_rps{s}"
        for k in ("saturation", "shed_onset", "p99_break", "ttft_break")
        for s in ("", "_low", "_high")
    ),
)


@dataclass
class SiteModel:
    """Everything gathered before writing: rows grouped every way a page needs them."""

    cat: Catalog
    rows: list[ResultRow]
    curves: dict[str, Curves]
    site_url: str
    by_gpu: dict[str, list[ResultRow]] = field(default_factory=dict)
    by_model: dict[str, list[ResultRow]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.rows:
            self.by_gpu.setdefault(r.gpu, []).append(r)
            self.by_model.setdefault(r.model, []).append(r)


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What a build wrote."""

    out: Path
    configs: int
    pages: int
    html_bytes: int
    files: int


def gather(cat: Catalog, results_dir: Path, site_url: str = "") -> SiteModel:
    """Phase one: read the sweep's tables and group them."""
    rows = read_results(results_dir)
    return SiteModel(cat, rows, read_curves(results_dir), site_url.rstrip("/"))


def hub_pages(m: SiteModel) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(scratch path, template, context) of every mkdocs page."""
    yield "index.md", "pages/home.md.j2", home_context(m.cat, m.rows)
    yield "gpu/index.md", "pages/gpus.md.j2", {"devices": gpu_index(m.cat, m.by_gpu)}
    yield "model/index.md", "pages/models.md.j2", {"models": model_index(m.cat, m.by_model)}
    yield "methodology.md", "pages/methodology.md.j2", methodology_context(m.cat)
    yield "search.md", "pages/search.md.j2", {}
    scenarios = scenario_contexts(m.cat.root / "scenarios")
    yield "scenario/index.md", "pages/scenarios.md.j2", {"scenarios": scenarios}
    for sc in scenarios:
        yield f"scenario/{sc['id']}.md", "pages/scenario.md.j2", sc
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


def _shell_page(env: Environment, depth: int) -> str:
    return env.get_template("pages/shell.md.j2").render(
        title=assemble.TITLE_MARK, description=assemble.DESC_MARK, marker=assemble.BODY_MARK
    )


def write_docs(env: Environment, m: SiteModel, w: assemble.Writer, depths: set[int]) -> None:
    """Render every mkdocs page, the shells and the static assets into the scratch docs dir."""
    for rel, template, ctx in hub_pages(m):
        w.write(rel, env.get_template(template).render(**ctx))
    for depth in sorted(depths):
        w.write(assemble.shell_rel(depth) + ".md", _shell_page(env, depth))
    w.copy_tree(TEMPLATES / "assets", "assets")
    specs = json.dumps(charts.chart_specs(), sort_keys=True, separators=(",", ":"))
    w.write("assets/bp/specs.js", f"window.BP_SPECS={specs};\n")
    if HANDWRITTEN.is_dir():
        w.copy_tree(HANDWRITTEN, "")


def _badge_parts(row: ResultRow) -> tuple[str, str]:
    if not row.fits:
        return "backpressure", "does not fit"
    b = break_rps(row)
    tail = f" · breaks at {b:.3g} rps ±{row.error_band_pct} %" if b is not None else ""
    return "backpressure", f"{row.effective_concurrency} concurrent{tail}"


def render_config(
    env: Environment, m: SiteModel, row: ResultRow, slo: float
) -> tuple[str, str, str]:
    """(title, description, body HTML) of one config page."""
    curves = m.curves.get(row.config_id)
    data = charts.datasets_for(row, curves, slo)
    ctx = config_context(m.cat, row, curves, m.by_model, data)
    _left, right = _badge_parts(row)
    link = f"{m.site_url}/{row.permalink}" if m.site_url else f"/{row.permalink}"
    alt = f"{ctx['title']}: {right}"
    ctx.update(
        fallback=fallbacks(data),
        badge_alt=alt,
        snippet=f"[![{alt}]({link}badge.svg)]({link})",
    )
    return ctx["title"], row.verdict, env.get_template("config.html.j2").render(**ctx)


def write_configs(
    env: Environment, m: SiteModel, w: assemble.Writer, shells: dict[int, assemble.Shell]
) -> None:
    """Write every config page, its badge and its JSON into the built site."""
    slo = slo_ms(m.cat)
    for row in m.rows:
        title, desc, body = render_config(env, m, row, slo)
        depth = _depth(row.permalink)
        w.write(page_path(row.permalink), shells[depth].wrap(title, desc, body))
        w.write(row.permalink + "badge.svg", badge(*_badge_parts(row), row.fits))
        w.write(f"api/configs/{row.config_id}.json", _json(row_json(row)))
    w.write("api/configs.json", _summary(m))


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def _summary(m: SiteModel) -> str:
    """``api/configs.json``: one line per config, so a rebuild's diff is one line per change."""
    lines = []
    for r in m.rows:
        item = {
            "id": r.config_id,
            "url": f"{m.site_url}/{r.permalink}" if m.site_url else r.permalink,
            "gpu": r.gpu,
            "model": r.model,
            "quant": r.quant,
            "context": r.context,
            "fits": r.fits,
            "slots": r.slots,
            **{k: getattr(r, k) for k in SUMMARY_FIELDS},
        }
        lines.append(json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    return "[\n" + ",\n".join(lines) + "\n]\n"


def _depth(permalink: str) -> int:
    return len([p for p in permalink.split("/") if p])


def validate(site: Path, m: SiteModel) -> None:
    """Every config page, badge and JSON is there, and no relative link is broken."""
    files = assemble.site_files(site)
    missing = [r.permalink for r in m.rows if page_path(r.permalink) not in files]
    missing += [
        f"api/configs/{r.config_id}.json"
        for r in m.rows
        if f"api/configs/{r.config_id}.json" not in files
    ]
    if missing:
        raise assemble.SiteError(f"{len(missing)} expected files missing, e.g. {missing[:3]}")
    bad = assemble.broken_links(site, files)
    if bad:
        raise assemble.SiteError("broken links:\n  " + "\n  ".join(bad))


def _write_site(env: Environment, m: SiteModel, tmp: Path, config_file: Path) -> None:
    """Phase two: mkdocs for the hubs, the shell for every config page, then search."""
    depths = {_depth(r.permalink) for r in m.rows} or {5}
    with tempfile.TemporaryDirectory(prefix="bp-docs-") as scratch:
        write_docs(env, m, assemble.Writer(Path(scratch)), depths)
        assemble.mkdocs_build(config_file, Path(scratch), tmp)
    shells = {d: assemble.read_shell(tmp, d) for d in depths}
    assemble.drop_shells(tmp)
    w = assemble.Writer(tmp)
    write_configs(env, m, w, shells)
    pages = sorted(
        f.removesuffix("index.html") for f in assemble.site_files(tmp) if f.endswith("index.html")
    )
    assemble.write_sitemap(w, m.site_url, pages)
    site_search.index(tmp)


def build_site(
    results_dir: Path,
    out: Path,
    catalog_dir: Path | None = None,
    config_file: Path = MKDOCS_YML,
    check_links: bool = True,
) -> BuildReport:
    """Build the whole site into ``out``; a failure leaves an existing ``out`` untouched."""
    from mkdocs.config import load_config

    site_url = load_config(config_file=str(config_file)).site_url or ""
    m = gather(load_catalog(catalog_dir), results_dir, site_url)
    env = make_env()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write_site(env, m, tmp, config_file)
        if check_links:
            validate(tmp, m)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    files = assemble.site_files(tmp)
    html = [f for f in files if f.endswith(".html")]
    report = BuildReport(
        out, len(m.rows), len(html), sum((tmp / f).stat().st_size for f in html), len(files)
    )
    assemble.publish(tmp, out)
    return report
