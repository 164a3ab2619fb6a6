"""The escaping functions, each against what reads its output: Markdown, a browser, CommonMark."""

from __future__ import annotations

import json
from html import unescape

import markdown
import pytest
from backpressure.generator.site.escape import (
    commonmark_text,
    http_url,
    json_text,
    md_link,
    md_text,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# Text as the catalog admits it: printable, one line, no surrounding whitespace.
LINE = st.text(
    st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")), max_size=60
).map(str.strip)
EXTENSIONS = ["tables", "admonition", "toc"]


def render(md: str) -> str:
    return markdown.markdown(md, extensions=EXTENSIONS)


@settings(max_examples=400, deadline=None)
@given(LINE.filter(bool))
def test_markdown_shows_md_text_as_the_text_it_was(text):
    html = render(md_text(text))
    assert html.startswith("<p>")
    assert html.endswith("</p>")
    inner = html[3:-4]
    assert "<" not in inner  # Markdown made no element of it
    assert unescape(inner) == text


@settings(max_examples=200, deadline=None)
@given(LINE.filter(bool), LINE.filter(bool))
def test_md_text_stays_in_its_table_cell_and_heading(a, b):
    table = render(f"| x | y |\n|---|---|\n| {md_text(a)} | {md_text(b)} |\n")
    assert table.count("<td>") == 2
    heading = render(f"### {md_text(a)}")
    assert heading.count("<h3") == 1
    assert "<a" not in heading
    assert "<em" not in heading


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "//evil.example/x",
        "/\\evil.example/x",
        "https://example.org/a b",
        'https://example.org/"onmouseover="x',
        "https://example.org/<x>",
        "https:///no-host",
        "ftp://example.org/x",
        "java\tscript:alert(1)",
        "relative/path",
        "",
    ],
)
def test_only_http_urls_become_links(url):
    assert http_url(url) is None
    assert "<a" not in str(md_link(url, "text"))


def test_an_http_url_is_a_link_as_written():
    url = "https://example.org/a_b.pdf?x=1&y=(2)#p.3"
    assert http_url(url) == url
    out = str(md_link(url, "doc"))
    assert unescape(out) == f'<a href="{url}">doc</a>'
    assert "&y" not in out  # the ampersand is a character reference
    assert "(" not in out


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("RTX 4090 · Llama 3.1 8B", "RTX 4090 · Llama 3.1 8B"),
        ("a](javascript:x)", r"a\]\(javascript:x\)"),
        ("<img src=x>", r"\<img src=x\>"),
        ("*a* _b_ `c` &amp;", r"\*a\* \_b\_ \`c\` \&amp;"),
        ("a\u202eb\nc", "abc"),
    ],
)
def test_commonmark_text_escapes_punctuation(text, expect):
    assert commonmark_text(text) == expect


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.sampled_from("<>&\"'\\/ab\u00e9\n")),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.sampled_from("<>&\"'\\ab"), max_size=4), inner, max_size=4)
    ),
    max_leaves=10,
)


@settings(max_examples=500)
@given(JSON_VALUES)
def test_json_text_is_the_same_data_with_no_markup_character_in_a_string(value):
    text = json_text(value)
    assert json.loads(text) == value
    assert not set("<>&'") & set(text)

    # no quote inside a string: past the escaped backslashes, no backslash-quote is left
    assert '\\"' not in text.replace("\\\\", "")
