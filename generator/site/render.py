"""The Jinja environment and the display filters every template shares.

Strict by construction: autoescaped, ``StrictUndefined`` (a missing value is an
error, not an empty cell), and in a Markdown template (``*.md.j2``) every value
that is not already markup goes through :func:`~generator.site.escape.md_text`
on its way out (``finalize``): a catalog string cannot reach a Markdown page
unescaped because a template forgot a filter. HTML templates get Jinja's
autoescape. The few filters that return markup (links, sources, front-matter
scalars, JSON) build it from escaped parts themselves.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

from backpressure.generator.paths import TEMPLATES
from backpressure.generator.records import context_label
from backpressure.generator.site.escape import (
    commonmark_text,
    http_url,
    md_link,
    md_text,
    site_path,
    source_md,
    source_short_md,
)
from backpressure.generator.text import band, gib, number, params_b, rps, tokens
from jinja2 import Environment, FileSystemLoader, StrictUndefined, pass_context
from jinja2.runtime import Context
from markupsafe import Markup, escape

MARKDOWN_SUFFIX = ".md.j2"


def md_escape(value: object) -> Markup:
    """A catalog string made safe for a Markdown page (see :func:`md_text`)."""
    return md_text(value)


def yaml_str(value: object) -> Markup:
    """An HTML-escaped string as a double-quoted YAML scalar, for front matter.

    mkdocs prints a page title into the chrome as it is, so the title is
    HTML-escaped first. Anything YAML would not read back as written (quotes,
    backslashes, line breaks, characters that are not printable) is escaped.
    """
    out = []
    for ch in str(escape(str(value))):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or unicodedata.category(ch)[0] in "CZ":
            out.append(" " if ch == " " else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return Markup('"' + "".join(out) + '"')


def to_json(value: Any) -> Markup:
    """Canonical JSON for a ``<script type="application/json">`` block.

    ``<``, ``>`` and ``&`` are written as unicode escapes, so no string in the
    data can close the script element.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


@pass_context
def _finalize(context: Context, value: Any) -> Any:
    """Every plain value printed by a Markdown template leaves through ``md_text``."""
    if isinstance(value, Markup) or not (context.name or "").endswith(MARKDOWN_SUFFIX):
        return value
    return md_text(value)


FILTERS = {
    "md_escape": md_escape,
    "source_md": source_md,
    "source_short": source_short_md,
    "md_link": md_link,
    "http_url": http_url,
    "path": site_path,
    "commonmark": commonmark_text,
    "yaml_str": yaml_str,
    "gib": gib,
    "rps": rps,
    "sig3": number,
    "band": band,
    "params_b": params_b,
    "tokens": tokens,
    "ctx": context_label,
    "to_json": to_json,
}


def make_env(templates: Path = TEMPLATES) -> Environment:
    """The one Jinja environment of the site build."""
    env = Environment(
        loader=FileSystemLoader(str(templates)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters.update(FILTERS)
    return env
