"""Where each config is published: its own page if it fits, else its row on the GPU x model page.

The permalink ``gpu/<gpu>/<model>/<quant>/<ctx>/`` (records.permalink) is kept
forever. Since the catalog grew past what a static host holds as a page per
config, only configs that fit get that page (and a badge); every config, fitting
or not, has a row on ``gpu/<gpu>/<model>/`` under the anchor ``<quant>-<ctx>``
(``-kv-<dtype>`` appended for a KV-cache variant), and ``404.html`` sends a
permalink with no page to that row (templates/assets/bp/notfound.js).
"""

from __future__ import annotations

from backpressure.generator.records import ResultRow, context_label


def anchor(quant: str, context: int, kv_dtype: str = "auto") -> str:
    """A config's anchor on its GPU x model page, e.g. ``q4_k_m-8k`` or ``fp8-32k-kv-fp8``."""
    base = f"{quant}-{context_label(context)}"
    return base if kv_dtype == "auto" else f"{base}-kv-{kv_dtype}"


def row_anchor(row: ResultRow) -> str:
    """:func:`anchor` of a row."""
    return anchor(row.quant, row.context, row.kv_dtype)


def pair_dir(gpu: str, model: str) -> str:
    """The GPU x model page's directory, e.g. ``gpu/rtx-4090/llama-3.1-8b/``."""
    return f"gpu/{gpu}/{model}/"


def has_page(row: ResultRow) -> bool:
    """Whether a config has a page of its own (and a badge): it fits."""
    return row.fits


def row_url(row: ResultRow) -> str:
    """Site-relative URL of a config: its permalink, or its anchored row when it has no page."""
    if has_page(row):
        return row.permalink
    return f"{pair_dir(row.gpu, row.model)}#{row_anchor(row)}"
