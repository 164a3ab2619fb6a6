"""GPU x model pages: every quant x context of one model on one device, a row each, anchored.

``gpu/<gpu>/<model>/index.html`` holds a row per config under the anchor
``<quant>-<ctx>`` (generator/site/links.py): verdict, slots, the binding
ceiling, the breaking rate with its band and rule (or why there is none), and
a link to the config's own page where it has one. A config that does not fit
has no page: its permalink lands here through ``404.html``.

Like config pages these are rendered outside mkdocs, into the shell of their
depth; they are cheap (a few dozen rows each), so every build renders them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from backpressure.generator import text
from backpressure.generator.records import ResultRow, context_label
from backpressure.generator.site.hubs import status
from backpressure.generator.site.links import has_page, pair_dir, row_anchor
from backpressure.generator.site.pages import RULE_LABELS, device_name, page_path
from backpressure.generator.site.publish import assemble
from jinja2 import Environment

if TYPE_CHECKING:
    from backpressure.catalog.loader import Catalog
    from backpressure.generator.site.model import SiteModel
    from backpressure.generator.site.publish.tree import Tree

DEPTH = 3  # gpu/<gpu>/<model>/
CEILINGS = {"kv": "KV cache (slots)", "bandwidth": "memory bandwidth", "compute": "compute"}


def breaking_text(row: ResultRow) -> str:
    """The breaking rate with its band and rule, or why a config has none."""
    kind = status(row)
    rule = RULE_LABELS.get(row.breaking_rule or "", "")
    if kind == "nofit":
        return f"none: does not fit, {text.gib(row.shortfall_bytes)} short"
    if kind == "slow":
        return "none: too slow to use"
    if kind == "any":
        return f"none: fails at any load ({rule})"
    if kind == "none":
        return "not simulated"
    low, high = text.rps(row.breaking_rps_low), text.rps(row.breaking_rps_high)
    return (
        f"{text.rps(row.breaking_rps)} rps ({low} to {high}, "
        f"{text.band(row.serving_band_pct or 0)}), {rule}"
    )


def row_context(cat: Catalog, row: ResultRow) -> dict[str, Any]:
    """One config's row on its GPU x model page (the page's own directory is the base)."""
    quant = cat.quants[row.quant].name if row.quant in cat.quants else row.quant
    label = f"{quant} · {context_label(row.context)}"
    if row.kv_dtype != "auto":
        label += f" · KV {row.kv_dtype}"
    return {
        "anchor": row_anchor(row),
        "label": label,
        "url": row.permalink.removeprefix(pair_dir(row.gpu, row.model)) if has_page(row) else "",
        "fits": row.fits,
        "kind": status(row),
        "verdict": row.verdict,
        "slots": row.slots,
        "ceiling": CEILINGS.get(row.binding_ceiling or "", "n/a"),
        "breaking": breaking_text(row),
    }


def _order(row: ResultRow) -> tuple[str, int, str]:
    return (row.quant, row.context, row.kv_dtype)


def headline(rows: list[ResultRow]) -> str:
    """The page's numbers in one sentence, for readers and for search."""
    fit = [r for r in rows if r.fits]
    rated = [r for r in fit if r.breaking_rps is not None and not r.fails_at_any_load]
    out = f"{len(fit)} of {len(rows)} configs fit"
    if not fit:
        return out + "."
    most = max(fit, key=lambda r: (r.slots, -r.context, r.config_id))
    out += f"; most slots: {most.slots:,} ({most.quant}, {context_label(most.context)})"
    if rated:
        best = max(rated, key=lambda r: (r.breaking_rps or 0.0, r.config_id))
        out += (
            f"; highest breaking rate: {text.rps(best.breaking_rps)} requests/s "
            f"({best.quant}, {context_label(best.context)})"
        )
    return out + "."


def pair_context(cat: Catalog, gpu: str, model: str, rows: Iterable[ResultRow]) -> dict[str, Any]:
    """Everything ``pair.html.j2`` renders for one GPU x model."""
    ordered = sorted(rows, key=_order)
    model_name = cat.models[model].name if model in cat.models else model
    device = device_name(cat, gpu)
    return {
        "title": f"{device} · {model_name}",
        "device": device,
        "model_name": model_name,
        "gpu_url": "../",
        "model_url": f"../../../model/{model}/",
        "json_url": f"../../../api/models/{model}.json",
        "headline": headline(ordered),
        "rows": [row_context(cat, r) for r in ordered],
    }


def write_pairs(env: Environment, m: SiteModel, tree: Tree, shell: assemble.Shell) -> list[str]:
    """Every GPU x model page into the tree; returns their site paths."""
    groups: dict[tuple[str, str], list[ResultRow]] = {}
    for r in m.rows:
        groups.setdefault((r.gpu, r.model), []).append(r)
    template = env.get_template("pair.html.j2")
    written = []
    for (gpu, model), rows in sorted(groups.items()):
        ctx = pair_context(m.cat, gpu, model, rows)
        rel = page_path(pair_dir(gpu, model))
        tree.write(rel, shell.wrap(ctx["title"], ctx["headline"], template.render(**ctx)))
        written.append(rel)
    return written
