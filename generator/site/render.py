"""The Jinja environment and the display filters every template shares.

Strict by construction: autoescaped, ``StrictUndefined`` (a missing value is an
error, not an empty cell), and catalog strings headed for Markdown go through the
named ``md_escape`` filter.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from backpressure.generator.paths import TEMPLATES
from backpressure.generator.records import context_label
from backpressure.generator.text import band, gib, params_b, rps, tokens


# Characters Markdown gives a meaning to; a backslash makes each literal.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def md_escape(value: object) -> Markup:
    """A catalog string made safe for Markdown text: HTML-escaped, then Markdown-escaped."""
    return Markup(_MD_SPECIAL.sub(r"\\\1", str(escape(str(value)))))


_URL = re.compile(r"https?://[A-Za-z0-9._~:/?#@!$&*+,;=%-]+[A-Za-z0-9/#=_-]")


def source_md(value: object) -> Markup:
    """A source string for Markdown: text escaped, each URL made an autolink."""
    text = str(value)
    out, pos = [], 0
    for m in _URL.finditer(text):
        out.append(md_escape(text[pos : m.start()]))
        out.append(Markup("<{}>").format(m.group(0)))
        pos = m.end()
    out.append(md_escape(text[pos:]))
    return Markup("").join(out)


def yaml_str(value: object) -> Markup:
    """An HTML-escaped string as a double-quoted YAML (JSON) scalar, for front matter."""
    return Markup(json.dumps(str(escape(str(value))), ensure_ascii=False))


def to_json(value: Any) -> Markup:
    """Canonical JSON for a ``<script type="application/json">`` block.

    ``<``, ``>`` and ``&`` are written as unicode escapes, so no string in the
    data can close the script element.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


FILTERS = {
    "md_escape": md_escape,
    "source_md": source_md,
    "yaml_str": yaml_str,
    "gib": gib,
    "rps": rps,
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
    )
    env.filters.update(FILTERS)
    return env
