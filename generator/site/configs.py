"""Config pages: render those whose content key changed, take the rest from the render cache.

Each config renders to three published files (its page, its badge, its JSON),
one cache entry under the config's key (generator/site_keys.py), plus the links
in its page's body, kept so that checking an unchanged page's links does not
mean reading it again. The site hard-links the entry's files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backpressure.generator import text
from backpressure.generator.keys import depth
from backpressure.generator.records import ResultRow
from backpressure.generator.results_io import row_json
from backpressure.generator.site import charts, gate
from backpressure.generator.site.chart_pack import pack
from backpressure.generator.site.escape import commonmark_text
from backpressure.generator.site.pages import RULE_LABELS, Limits, config_context, page_path
from backpressure.generator.site.publish import assemble
from backpressure.generator.site.svg import badge, fallbacks
from jinja2 import Environment

if TYPE_CHECKING:
    from backpressure.generator.site.model import SiteModel
    from backpressure.generator.site.publish.tree import Tree

SUMMARY_FIELDS = (
    "error_band_pct",
    "serving_band_pct",
    "max_concurrency",
    "binding_ceiling",
    "saturation_bound",
    "kv_dtype",
    "usable",
    "fails_at_any_load",
    "breaking_rule",
    *(f"{k}{s}" for k in ("saturation_rps", "breaking_rps") for s in ("", "_low", "_high")),
    "shed_onset_rps",
    "p99_break_rps",
    "ttft_break_rps",
    "soak_break_rps",
)


@dataclass(frozen=True, slots=True)
class Written:
    """What writing the config pages did: which were rendered, and the body links by key."""

    rendered: tuple[str, ...]
    links: dict[str, list[str]]


def badge_parts(row: ResultRow) -> tuple[str, str]:
    """The badge's two halves: the breaking rate and its rule, or why there is none."""
    if not row.fits:
        return "backpressure", "does not fit"
    if row.usable is False:
        return "backpressure", "too slow to use"
    if row.fails_at_any_load:
        return "backpressure", f"fails at any load ({RULE_LABELS.get(row.breaking_rule or '', '')})"
    if row.breaking_rps is None:
        return "backpressure", "not simulated"
    rule = RULE_LABELS.get(row.breaking_rule or "", "")
    return "backpressure", (
        f"breaks at {text.rps(row.breaking_rps)} rps ±{row.serving_band_pct} % ({rule})"
    )


def render_config(
    env: Environment, m: SiteModel, row: ResultRow, lim: Limits
) -> tuple[str, str, str]:
    """(title, description, body HTML) of one config page."""
    curves = m.curves.get(row.config_id)
    data = charts.datasets_for(row, curves, lim)
    gate.check_data(f"config {row.config_id}: chart data", data)
    ctx = config_context(m.cat, row, curves, m.nearest.get(row.config_id, []), data, lim)
    _left, right = badge_parts(row)
    link = f"{m.site_url}/{row.permalink}" if m.site_url else f"/{row.permalink}"
    alt = f"{ctx['title']}: {right}"
    ctx.update(
        chart_data=pack(data),
        fallback=fallbacks(data),
        badge_alt=alt,
        # Markdown for the reader's own docs: the names in it are escaped for CommonMark.
        snippet=f"[![{commonmark_text(alt)}]({link}badge.svg)]({link})",
    )
    return ctx["title"], row.verdict, env.get_template("config.html.j2").render(**ctx)


def config_files(
    env: Environment, m: SiteModel, row: ResultRow, lim: Limits, shell: assemble.Shell
) -> tuple[dict[str, bytes], list[str]]:
    """The cache entry of one config (page, badge, JSON) and the links in its page's body."""
    title, desc, body = render_config(env, m, row, lim)
    parts = {
        "html": shell.wrap(title, desc, body).encode("utf-8"),
        "svg": badge(*badge_parts(row), row.breaking_rps is not None).encode("utf-8"),
        "json": config_json(row).encode("utf-8"),
    }
    return parts, assemble.page_links(body)


def write_configs(
    env: Environment,
    m: SiteModel,
    tree: Tree,
    shells: dict[int, assemble.Shell],
    keys: dict[str, str],
    lim: Limits,
) -> Written:
    """Place every config's page, badge and JSON in the tree, rendering only cache misses."""
    cache = tree.cache
    rendered = []
    links: dict[str, list[str]] = {}
    for row in m.rows:
        key = keys[row.config_id]
        cached = cache.config(key)
        if cached is None:
            parts, body_links = config_files(env, m, row, lim, shells[depth(row.permalink)])
            entry = cache.put_config(key, parts, body_links)
            rendered.append(row.config_id)
        else:
            entry, body_links = cached
        links[key] = body_links
        tree.place(page_path(row.permalink), entry["html"])
        tree.place(row.permalink + "badge.svg", entry["svg"])
        tree.place(f"api/configs/{row.config_id}.json", entry["json"])
    return Written(tuple(rendered), links)


def config_json(row: ResultRow) -> str:
    """``api/configs/<id>.json``: the row, every field, canonically."""
    return json.dumps(row_json(row), sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def summary_line(r: ResultRow, site_url: str) -> str:
    """One config's line of ``api/configs.json``."""
    item = {
        "id": r.config_id,
        "url": f"{site_url}/{r.permalink}" if site_url else r.permalink,
        "gpu": r.gpu,
        "model": r.model,
        "quant": r.quant,
        "context": r.context,
        "fits": r.fits,
        "slots": r.slots,
        **{k: getattr(r, k) for k in SUMMARY_FIELDS},
    }
    return json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def summary(m: SiteModel) -> str:
    """``api/configs.json``: one line per config, so a rebuild's diff is one line per change."""
    return "[\n" + ",\n".join(summary_line(r, m.site_url) for r in m.rows) + "\n]\n"
