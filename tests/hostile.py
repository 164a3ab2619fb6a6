"""A catalog whose every displayed string is an attack, built into a site, and the checks.

Each payload carries a marker ``BPXnn`` and, where it could run, calls
``alert(nn)``. The payloads go round-robin into every text field a page
shows: GPU, rig, model, quant, runtime and KV-dtype names and notes, model
families, every source, calibration units, meanings and sources, scenario
names and descriptions, part names. One GPU gets an id made of every
character an id may hold. The checks read what a browser would (entities
decoded) and look for what would run: event-handler attributes, script-like
URLs, elements no page of ours has, script text; and for what would show
wrongly: a payload that is not on the page as the text it was.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import yaml
from backpressure.catalog.loader import DEFAULT_ROOT, load_catalog

from tests.generator.fixtures import write_fixture

PAYLOADS: tuple[str, ...] = tuple(
    p.replace("NN", f"{i:02d}").replace("MARK", f"BPX{i:02d}")
    for i, p in enumerate(
        [
            "<script>alert(NN)</script> MARK",
            "<img src=x onerror=alert(NN)> MARK",
            "![x](data:,){: onerror=alert(NN)} MARK",
            "[c](javascript:alert(NN)) MARK",
            '"><svg onload=alert(NN)> MARK',
            "'><iframe src=javascript:alert(NN)></iframe> MARK",
            "{{ NN * 7 }} {% if 1 %}MARK{% endif %}",
            "</script><script>alert(NN)</script> MARK",
            '<a href="javascript:alert(NN)">MARK</a>',
            "*em* __strong__ `code` ~~del~~ MARK",
            "| cell | MARK |",
            "<details open ontoggle=alert(NN)>MARK",
            "&lt;script&gt;alert(NN)&lt;/script&gt; MARK",
            "&#60;img src=x onerror=alert(NN)&#62; MARK",
            "<style>@import'//evil.example/NN'</style> MARK",
            "[![a](x)](javascript:alert(NN)) MARK",
            '<math><mi xlink:href="javascript:alert(NN)">MARK</mi></math>',
            "JaVaScRiPt:alert(NN) MARK",
            'https://example.org/"onmouseover="alert(NN)" MARK',
            "https://example.org/<script>alert(NN)</script> MARK",
            "<!-- MARK -->-->",
            "]]><script>alert(NN)</script> MARK",
            "\\u003cscript\\u003ealert(NN)\\u003c/script\\u003e MARK",
            "${alert(NN)} `${alert(NN)}` MARK",
            '<base href="//evil.example/NN/"> MARK',
            '<meta http-equiv="refresh" content="0;url=javascript:alert(NN)"> MARK',
            "<form action=javascript:alert(NN)><button>MARK</button></form>",
            "<object data=javascript:alert(NN)></object> MARK",
            "<embed src=javascript:alert(NN)> MARK",
            "<input autofocus onfocus=alert(NN)> MARK",
            "<body onload=alert(NN)> MARK",
            "<video><source onerror=alert(NN)></video> MARK",
            "<svg><script>alert(NN)</script></svg> MARK",
            "<x onclick=alert(NN)>MARK</x>",
            "`<img src=x onerror=alert(NN)>` MARK",
            '!!! danger "MARK" alert(NN)',
            "# MARK heading",
            "> MARK quote",
            "1. MARK list",
            "- MARK item",
            "[ref]: javascript:alert(NN) MARK",
            "<https://evil.example/NN> MARK",
            "<evil@example.org> MARK",
            "\\<script\\>alert(NN)\\</script\\> MARK",
            "{#id .cls onerror=alert(NN)} MARK",
            '{: .x onclick="alert(NN)" } MARK',
            '"; alert(NN); // MARK',
            "'); alert(NN); // MARK",
            "</title><script>alert(NN)</script> MARK",
            "</textarea><script>alert(NN)</script> MARK",
            '<noscript><p title="</noscript><img src=x onerror=alert(NN)>"> MARK',
            "<a href=# onclick=alert(NN)>MARK</a>",
            "%3Cscript%3Ealert(NN)%3C/script%3E MARK",
            '\\"><img src=x onerror=alert(NN)> MARK',
            "<img src=x onerror=&#97;lert(NN)> MARK",
            "data:text/html,<script>alert(NN)</script> MARK",
            "vbscript:msgbox(NN) MARK",
            "<<script>script>alert(NN)<</script>/script> MARK",
            "<svg/onload=alert(NN)> MARK",
            "\u202eMARK (would be a bidi override; replaced below)",
        ]
    )
)
# A bidi override cannot enter the catalog (tests/catalog/test_strict.py): the
# last payload keeps its place with a printable stand-in.
PAYLOADS = (*PAYLOADS[:-1], PAYLOADS[-1].replace("\u202e", "\u2192"))
MARK = re.compile(r"BPX\d\d")
# A source must be a URL or a document: these are the hostile URLs among them.
HOSTILE_URLS = (
    "javascript:alert(90) BPX90",
    "data:text/html,<script>alert(91)</script> BPX91",
    "JAVASCRIPT:alert(92) BPX92",
    "JaVa&#115;cript:alert(93) BPX93",
    "//evil.example/BPX94",
    'https://example.org/a b"onclick=alert(95) BPX95',
)
ALL = (*PAYLOADS, *HOSTILE_URLS)
ODD_ID = "odd_id.with-every_char.0"  # every character an id may hold
GPUS = ("rtx-4090", "h100-sxm", "m4-max-128gb", "rtx-3060-12gb")
RIGS = ("2x-rtx-4090",)
MODELS = ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b")
SETTINGS = "contexts: [2048, 8192]\nsweep_quants: [q4_k_m, bf16, fp8]\n"


class _Cycle:
    def __init__(self, items: tuple[str, ...]) -> None:
        self.items, self.i = items, 0

    def next(self, limit: int = 500) -> str:
        for _ in range(len(self.items)):
            item = self.items[self.i % len(self.items)]
            self.i += 1
            if len(item) <= limit:
                return item
        raise AssertionError("no payload short enough")


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")


def _hostile_entity(
    data: dict[str, Any], names: _Cycle, urls: _Cycle, fields: tuple[str, ...]
) -> None:
    for field in fields:
        if field in data or field == "notes":
            data[field] = names.next(120 if field in ("name", "family") else 500)
    sources = data.get("sources", {})
    for i, key in enumerate(sorted(sources)):
        # Every other source a hostile URL, the rest hostile prose (some with a real URL).
        sources[key] = urls.next() if i % 2 else names.next() + " https://example.org/ok"


def make_hostile_catalog(dest: Path) -> Path:
    """A small catalog copy where every displayed string is a payload; returns its root."""
    root = dest / "catalog"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    for folder, keep in (("gpus", GPUS), ("rigs", RIGS), ("models", MODELS)):
        for path in (root / folder).glob("*.yaml"):
            if path.stem not in keep:
                path.unlink()
    (root / "settings.yaml").write_text(SETTINGS)
    names, urls = _Cycle(PAYLOADS), _Cycle(HOSTILE_URLS)
    for folder in ("gpus", "rigs", "models", "quants", "runtimes", "kv_dtypes", "parts"):
        for path in sorted((root / folder).glob("*.yaml")):
            data = yaml.safe_load(path.read_text())
            _hostile_entity(data, names, urls, ("name", "family", "notes"))
            _dump(path, data)
    cal = yaml.safe_load((root / "calibration.yaml").read_text())
    for entry in cal.values():
        entry["unit"] = names.next(40)
        entry["meaning"] = names.next()
        entry["source"] = names.next()
    _dump(root / "calibration.yaml", cal)
    for path in sorted((root / "scenarios").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        data["name"], data["description"] = names.next(120), names.next()
        _dump(path, data)
    # One GPU under an id of every character ids allow (its rig follows it).
    gpu = yaml.safe_load((root / "gpus" / "rtx-3060-12gb.yaml").read_text())
    gpu["id"] = ODD_ID
    _dump(root / "gpus" / f"{ODD_ID}.yaml", gpu)
    (root / "gpus" / "rtx-3060-12gb.yaml").unlink()
    return root


def combos(cat: Any) -> list[tuple[str, str, str, int]]:
    """Every device x model x swept quant x context of the small catalog, as the sweep sees them."""
    from backpressure.generator import resolve

    out = []
    for device in cat.devices():
        kind = resolve.device_for(cat, device).memory_kind
        for mid, arch in cat.archs.items():
            for qid in cat.settings.sweep_quants:
                rt = resolve.default_runtime(cat, cat.quants[qid], kind)
                if kind not in cat.runtimes[rt].memory_kinds:
                    continue
                for ctx in sorted({min(c, arch.max_context) for c in cat.settings.contexts}):
                    out.append((device, mid, qid, ctx))
    return out


def build_hostile_site(base: Path) -> tuple[Path, Path]:
    """Build the hostile catalog's site under ``base``; returns (site, catalog)."""
    from backpressure.generator.site.build import build_site

    root = make_hostile_catalog(base)
    cat = load_catalog(root)
    write_fixture(base / "sweep", combos(cat), cat)
    build_site(base / "sweep", base / "site", root)
    return base / "site", root


# -- what a reader's browser would make of a page ------------------------------

SCRIPT_URL = re.compile(r"^\s*(javascript|data|vbscript):", re.I)
URL_ATTRS = {"href", "src", "action", "formaction", "data", "xlink:href", "poster", "srcset"}
FOREIGN_TAGS = {"iframe", "object", "embed", "base", "form", "frame", "frameset", "applet"}
OUR_SCRIPT_IDS = {"__config", "bp-chart-data"}


class PageReader(HTMLParser):
    """Collects a page's elements, attributes and visible text as a browser would decode them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.text: list[str] = []
        self.attrs: list[str] = []
        self.scripts: list[str] = []
        self._script: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        where = f"<{tag}>"
        for name, value in attrs:
            value = value or ""
            self.attrs.append(value)
            if name.lower().startswith("on"):
                self.problems.append(f"{where} has an event handler {name}={value[:60]!r}")
            if name.lower() in URL_ATTRS and SCRIPT_URL.match(value):
                self.problems.append(f"{where} {name} is a script URL: {value[:60]!r}")
            if name.lower() in URL_ATTRS and value.startswith(("//", "\\", "/\\")):
                self.problems.append(f"{where} {name} leaves the site: {value[:60]!r}")
        if tag in FOREIGN_TAGS:
            self.problems.append(f"{where}: an element no page of ours has")
        if tag == "meta" and dict(attrs).get("http-equiv", "").lower() == "refresh":
            self.problems.append("<meta http-equiv=refresh>")
        if tag == "script":
            a = dict(attrs)
            if a.get("src") is None and a.get("id") not in OUR_SCRIPT_IDS:
                self.problems.append(f"<script> without src: {a}")
            self._script = []
        if tag == "style" and self.getpos()[0] > 0 and self.text:
            self.problems.append("<style> in the body")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script.append(data)
        else:
            self.text.append(data)


def read_page(html: str) -> PageReader:
    reader = PageReader()
    reader.feed(html)
    reader.close()
    return reader


def pagefind_records(site: Path) -> list[dict[str, Any]]:
    """Every page record of both Pagefind bundles (fragments are gzip'd JSON)."""
    out = []
    for frag in sorted(site.glob("pagefind*/fragment/*.pf_fragment")):
        raw = gzip.decompress(frag.read_bytes())
        start = raw.index(b"{")
        out.append(json.loads(raw[start:]))
    return out
