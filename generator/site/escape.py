"""The only ways catalog text reaches a page: one escaping function per output context.

- **HTML** (``config.html.j2``, SVG, attributes there): :func:`html_text`, which is
  Jinja's autoescape (``markupsafe.escape``): ``& < > " '`` become entities.
- **Markdown documents** (the hub pages mkdocs renders): :func:`md_text`. Every
  character but letters, digits, single inner spaces and printable non-ASCII
  becomes a numeric character reference (``.`` is ``&#46;``). Markdown gives
  those no meaning, so no name can become emphasis, a link, an image, a list,
  a table cell or an attribute list; the browser shows the characters as they
  were. The same text is safe inside a raw HTML block and inside a quoted
  attribute, where Markdown does not reach: one function for the whole file.
- **URLs** (``href``): :func:`http_url` admits absolute ``http``/``https``
  addresses only; anything else (``javascript:``, ``data:``, ``//host``,
  whitespace tricks) is not a link and is shown as text. Links inside the
  site, built from ids, go through :func:`site_path`.
- **JSON files** the site serves (``api/``, ``rig/data/``): :func:`json_text`,
  compact sorted JSON whose strings hold ``< > & " '`` as unicode escapes, so
  no payload appears verbatim even to a reader that opens the file as a page.
- **Markdown for other people's documents** (the badge snippet a reader copies):
  :func:`commonmark_text`, backslash escapes, which every CommonMark renderer reads.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from markupsafe import Markup, escape

_KEEP_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def html_text(value: object) -> Markup:
    """Text for an HTML element or a quoted attribute (what autoescape does)."""
    return escape(str(value))


def _ref(ch: str) -> str:
    return f"&#{ord(ch)};"


def md_text(value: object) -> Markup:
    """Text for a Markdown document: inert to Markdown and to HTML, wherever it lands."""
    out = []
    prev = " "  # a leading space is encoded too: four would start a code block
    for ch in str(value):
        if ch in _KEEP_ASCII or (ch == " " and prev != " "):
            out.append(ch)
        elif ord(ch) < 128 or unicodedata.category(ch) in _HIDDEN:
            out.append(_ref(ch))
        else:
            out.append(ch)
        prev = ch
    return Markup("".join(out))


# Characters a URL may hold as written here; anything else (spaces, controls,
# quotes, angle brackets, backslashes, which browsers read as "/") refuses the URL.
_URL_CHARS = re.compile(r"^[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+$")


def http_url(value: object) -> str | None:
    """``value`` if it is an absolute http(s) URL with a host, else None."""
    text = str(value)
    if len(text) > 2000 or not _URL_CHARS.match(text):
        return None
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return text


# A path inside the site built from ids (which ID_PATTERN limits to these characters).
_SITE_PATH = re.compile(r"^[A-Za-z0-9._/#-]*$")


def site_path(value: object) -> Markup:
    """A link or anchor inside the site, made of ids: as written when it is only those.

    Markdown does not read inside an HTML tag, and these characters mean nothing
    to HTML, so the path stays readable (and short: a hub page has a thousand of
    them). Anything else is escaped as Markdown text.
    """
    text = str(value)
    return (
        Markup(text)
        if _SITE_PATH.match(text) and ".." not in text.replace("../", "")
        else md_text(text)
    )


def md_link(url: object, text: object) -> Markup:
    """A link in a Markdown document, or just the text when ``url`` is not http(s)."""
    href = http_url(url)
    if href is None:
        return md_text(text)
    return Markup(f'<a href="{md_text(href)}">{md_text(text)}</a>')


# An http(s) URL inside free text, up to a space or a character that ends prose.
_URL_IN_TEXT = re.compile(r"https?://[A-Za-z0-9._~:/?#@!$&*+,;=%-]+[A-Za-z0-9/#=_-]")


def source_md(value: object, name: Callable[[str], str] = str) -> Markup:
    """A source string for a Markdown document: text escaped, each http(s) URL a link.

    ``name`` gives a link's text from its URL (the URL itself by default).
    """
    text = str(value)
    out, pos = [], 0
    for m in _URL_IN_TEXT.finditer(text):
        out.append(md_text(text[pos : m.start()]))
        out.append(md_link(m.group(0), name(m.group(0))))
        pos = m.end()
    out.append(md_text(text[pos:]))
    return Markup("").join(out)


def source_label(url: str) -> str:
    """A short name for a URL: ``owner/repo: dir/file#L12``, ``owner/repo#123`` or host/file."""
    parts = urlsplit(url)
    segs = [p for p in parts.path.split("/") if p]
    anchor = f"#{parts.fragment}" if parts.fragment else ""
    if parts.hostname == "github.com" and len(segs) >= 2:
        repo = "/".join(segs[:2])
        if len(segs) >= 4 and segs[2] in ("issues", "pull", "discussions"):
            return f"{repo}#{segs[3]}"
        if len(segs) >= 5 and segs[2] in ("blob", "tree"):
            return f"{repo}: {'/'.join(segs[-2:])}{anchor}"
        return repo
    tail = segs[-1] if segs else ""
    return f"{parts.hostname}/{tail}{anchor}" if tail else f"{parts.hostname}{anchor}"


def source_short_md(value: object) -> Markup:
    """Like :func:`source_md`, each URL a link named by :func:`source_label`."""
    return source_md(value, source_label)


# What CommonMark reads inside an image's description: brackets and parentheses
# (which end it), code, emphasis, HTML, entities; backslash-escaped, the rest
# (dots, dashes, colons) stays readable.
_CM_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>!|&~#])")


def commonmark_text(value: object) -> str:
    """Text for CommonMark (a snippet pasted into someone's docs): its syntax escaped.

    Characters a reader cannot see are dropped: the snippet is plain text.
    """
    visible = "".join(c for c in str(value) if unicodedata.category(c) not in _HIDDEN)
    return _CM_SPECIAL.sub(r"\\\1", visible)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_PIECE = re.compile(r"""\\.|[<>&']""")
_JSON_MARKUP = {"<": r"\u003c", ">": r"\u003e", "&": r"\u0026", "'": r"\u0027", '\\"': r"\u0022"}


def _json_string(m: re.Match[str]) -> str:
    return _JSON_PIECE.sub(lambda p: _JSON_MARKUP.get(p.group(0), p.group(0)), m.group(0))


def json_text(value: Any) -> str:
    r"""Compact JSON with sorted keys, markup characters in strings as escapes.

    >>> print(json_text({"name": '<b>"x"</b>', "n": 1}))
    {"n":1,"name":"\u003cb\u003e\u0022x\u0022\u003c/b\u003e"}
    >>> json.loads(json_text(["a\\", "it's", 'q"\\"'])) == ["a\\", "it's", 'q"\\"']
    True
    """
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return _JSON_STRING.sub(_json_string, text)
