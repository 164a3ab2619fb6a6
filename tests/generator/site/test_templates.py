"""Template gallery: every template renders for fixture data, strictly and escaped."""

from __future__ import annotations

import dataclasses

import jinja2
import pytest
from backpressure.generator import text
from backpressure.generator.site import charts, render
from backpressure.generator.site.mkdocs_step import hub_pages
from backpressure.generator.site.model import SiteModel
from backpressure.generator.site.pages import Limits, config_context
from backpressure.generator.site.svg import fallbacks

from tests.generator.fixtures import _curves, make_rows


@pytest.fixture(scope="module")
def model(cat):
    rows = make_rows(cat=cat)
    return SiteModel(cat, rows, {r.config_id: _curves(r) for r in rows}, "")


def test_environment_is_strict():
    env = render.make_env()
    assert env.autoescape is True
    assert env.undefined is jinja2.StrictUndefined
    assert env.trim_blocks
    assert env.lstrip_blocks
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_every_hub_template_renders(model):
    env = render.make_env()
    seen = set()
    for rel, template, ctx in hub_pages(model):
        text = env.get_template(template).render(**ctx)
        assert text.startswith("---\n"), rel
        seen.add(template)
    assert seen >= {
        "pages/home.md.j2",
        "pages/gpu.md.j2",
        "pages/model.md.j2",
        "pages/methodology.md.j2",
        "pages/gpus.md.j2",
        "pages/models.md.j2",
        "pages/search.md.j2",
    }


def _config_html(model, row) -> str:
    env = render.make_env()
    curves = model.curves[row.config_id]
    lim = Limits.of(model.cat)
    data = charts.datasets_for(row, curves, lim)
    ctx = config_context(model.cat, row, curves, model.nearest.get(row.config_id, []), data, lim)
    ctx.update(fallback=fallbacks(data), badge_alt="alt", snippet="snippet")
    ctx["siblings"] = model.siblings.of(row, lambda d: d)
    return env.get_template("config.html.j2").render(**ctx)


@pytest.mark.parametrize("index", range(11))
def test_config_template_renders_for_every_fixture_combo(model, index):
    row = model.rows[index]
    html = _config_html(model, row)
    assert row.config_id in html
    assert "every config on this device" in html


def test_methodology_lists_every_constant_and_band_rule(model, cat):
    from html import unescape

    from backpressure.engine.bands import WIDENINGS

    env = render.make_env()
    page = dict((rel, (t, c)) for rel, t, c in hub_pages(model))["methodology.md"]
    text = unescape(env.get_template(page[0]).render(**page[1]))
    for name in cat.calibration:
        assert f"<code>{name}</code>" in text
    for key, (pct, _reason) in WIDENINGS.items():
        assert f"| <code>{key}</code> | +{pct} |" in text


def test_markdown_templates_escape_every_value_by_construction():
    # A Markdown template prints no plain value raw, even without a filter.
    env = render.make_env()
    md = env.from_string("{{ x }}")
    md.name = "probe.md.j2"  # finalize looks at the template's name
    html = env.from_string("{{ x }}")
    assert str(env.get_template("pages/search.md.j2").render()).startswith("---")
    out = md.render(x="*a* <b>")
    assert "*" not in out
    assert "<" not in out
    assert html.render(x="*a* <b>") == "*a* &lt;b&gt;"


def test_md_escape_neutralizes_markdown_and_html():
    from html import unescape

    text = "<b>*x*</b> [a](b) | `c` {: onerror=x}"
    out = str(render.md_escape(text))
    assert unescape(out) == text
    for ch in "<>*[]()|`{}:=":
        assert ch not in out


def test_source_md_links_urls_and_escapes_the_rest():
    from html import unescape

    out = str(render.source_md("see https://example.org/a_b.pdf (p. 3) *x*"))
    assert unescape(out) == (
        'see <a href="https://example.org/a_b.pdf">https://example.org/a_b.pdf</a> (p. 3) *x*'
    )
    assert "*" not in out
    assert "<a" not in str(render.source_md("javascript:alert(1) data:text/html,x"))


def test_source_short_names_links_and_escapes_the_rest():
    from html import unescape

    url = "https://github.com/o/r/blob/0123abc/docs/lab/h200.md#L379"
    out = unescape(str(render.FILTERS["source_short"](f"(log) {url} *x*")))
    assert out == f'(log) <a href="{url}">o/r: lab/h200.md#L379</a> *x*'
    issue = unescape(str(render.FILTERS["source_short"]("https://github.com/o/r/issues/12")))
    assert issue.endswith(">o/r#12</a>")
    assert "<a" not in str(render.FILTERS["source_short"]("javascript:alert(1)"))


def test_json_in_script_cannot_close_the_element():
    out = str(render.to_json({"a": "</script><b>&"}))
    assert "</script>" not in out
    assert "<" not in out
    assert "&" not in out


def test_yaml_str_is_a_quoted_scalar():
    import yaml

    assert yaml.safe_load("t: " + str(render.yaml_str('A "b": c # d'))) == {
        "t": "A &#34;b&#34;: c # d"
    }


def test_pair_template_renders_a_row_per_config_with_its_anchor(model):
    from backpressure.generator.site.links import row_anchor
    from backpressure.generator.site.pair_pages import pair_context

    env = render.make_env()
    groups: dict[tuple[str, str], list] = {}
    for r in model.rows:
        groups.setdefault((r.gpu, r.model), []).append(r)
    for (gpu, mid), rows in groups.items():
        html = env.get_template("pair.html.j2").render(**pair_context(model.cat, gpu, mid, rows))
        for r in rows:
            assert html.count(f'<tr id="{row_anchor(r)}"') == 1, r.config_id
        assert html.count("<tr id=") == len(rows)
        assert html.count('">page</a>') == sum(r.fits for r in rows)


def test_a_hybrid_models_page_says_which_layers_cache_and_what_the_rest_hold(cat):
    from html import unescape

    from backpressure.generator.site.hubs import model_context

    env = render.make_env()
    text = unescape(
        env.get_template("pages/model.md.j2").render(
            **model_context(cat, "granite-4.0-h-small", [])
        )
    )
    assert "| layers with a KV cache | 4 of 40;" in text
    # 36 layers x (128 x 64 x 128 state + 3 x 8448 conv) elements, 2 and 4 bytes each
    per_seq = 36 * (128 * 64 * 128 + 3 * 8448)
    assert f"| fixed-state layers | 36 Mamba-2: {per_seq * 2 / 2**20:.2f} MiB" in text
    assert f"({per_seq * 4 / 2**20:.2f} MiB in llama.cpp" in text
    # its keys come from IBM's GGUF metadata, not a config.json: the page says so
    assert "config.json" not in text.split("Where the figures come from")[0]
    assert "| layers | 40 | architecture keys |" in text
    dense = env.get_template("pages/model.md.j2").render(**model_context(cat, "llama-3.1-8b", []))
    assert "fixed-state layers" not in dense
    assert "| layers | 32 | config.json |" in unescape(dense)


def test_a_config_that_fails_at_any_load_publishes_no_rate_with_a_band(model):
    # The rule's own rate is the lowest rate tried: the table says so, with no band,
    # as the headline does; a band would present it as a breaking rate.
    base = next(r for r in model.rows if r.fits and r.ttft_break_rps is not None)
    low = base.ttft_break_rps / 10
    row = dataclasses.replace(
        base,
        breaking_rps=None,
        breaking_rps_low=None,
        breaking_rps_high=None,
        fails_at_any_load=True,
        breaking_rule="ttft",
        ttft_break_rps=low,
    )
    html = _config_html(model, row)
    table = html[html.index('<h2 id="breaking-points">') : html.index('<p class="bp-band">')]
    assert "<strong>Fails at any load</strong>" in table
    assert f"fires at the lowest rate tried, {text.rps(low)} rps" in table
    ttft_row = table[table.index("TTFT breaks") :].split("</tr>")[0]
    assert "±" not in ttft_row
    saturation = table[table.index("Saturation (closed loop)") :].split("</tr>")[0]
    assert f"{text.rps(row.saturation_rps)} rps" in saturation
    assert "lowest rate tried" not in saturation
