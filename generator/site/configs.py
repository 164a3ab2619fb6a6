"""Config pages: render those whose content key changed, take the rest from the render cache.

Each config that fits renders to two published files (its page and its badge),
one cache entry under the config's key (generator/keys.py), plus the links in
its page's body, kept so that checking an unchanged page's links does not mean
reading it again. The site hard-links the entry's files. A config that does not
fit has no page: its row on the GPU x model page stands for it
(generator/site/pair_pages.py), and its data is in its model's JSON
(generator/site/model_api.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from backpressure.generator import text
from backpressure.generator.keys import depth
from backpressure.generator.records import ResultRow
from backpressure.generator.site import charts, gate
from backpressure.generator.site.chart_pack import pack
from backpressure.generator.site.escape import commonmark_text
from backpressure.generator.site.links import has_page
from backpressure.generator.site.pages import (
    RULE_LABELS,
    Limits,
    config_context,
    device_name,
    page_path,
)
from backpressure.generator.site.publish import assemble
from backpressure.generator.site.svg import badge, fallbacks
from jinja2 import Environment

if TYPE_CHECKING:
    from backpressure.generator.site.model import SiteModel
    from backpressure.generator.site.publish.tree import Tree


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
    ctx["siblings"] = m.siblings.of(row, lambda d: device_name(m.cat, d))
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
    """The cache entry of one config (page, badge) and the links in its page's body."""
    title, desc, body = render_config(env, m, row, lim)
    parts = {
        "html": shell.wrap(title, desc, body).encode("utf-8"),
        "svg": badge(*badge_parts(row), row.breaking_rps is not None).encode("utf-8"),
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
    """Place the page and badge of every config that fits, rendering only cache misses."""
    cache = tree.cache
    rendered = []
    links: dict[str, list[str]] = {}
    for row in m.rows:
        if not has_page(row):
            continue
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
    return Written(tuple(rendered), links)
