"""``backpressure verify``: recompute published configs and compare what a reader sees.

For each config the row and curves are recomputed from the catalog, then the
files a reader sees are made again with the site's own code and compared:

- ``api/configs/<id>.json``, byte for byte, and field by field with types
  (``85`` is not ``85.0``, ``true`` is not ``1``, a key given twice is tampering);
- the config page: its body (every number, the worked arithmetic, the chart
  data and static charts, the nearest fits) must appear in it exactly, and its
  title and description must be the recomputed ones;
- its badge, byte for byte;
- its line of ``api/configs.json``;
- its cells on the GPU hub, the model hub and (for the headline configs) the home page.

A site directory is verified whole, or on a seeded sample (``--sample N``).
Exit 1 for any mismatch, 2 for a file that cannot be read.
"""

from __future__ import annotations

import random
import re
import tempfile
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from html import escape as html_escape
from pathlib import Path
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.ci import strict_json
from backpressure.generator.keys import InputKeys
from backpressure.generator.records import SEP, Curves, ResultRow
from backpressure.generator.results_io import (
    RESULTS,
    curves_line,
    parse_curves,
    read_results,
    results_csv,
    row_json,
)
from backpressure.generator.sweep.combos import Combo, enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate_many

PERMALINK = re.compile(r"gpu/([^/]+)/([^/]+)/([^/]+)/([^/]+)/(?:kv-([^/]+)/)?$")
_HINTS = typing.get_type_hints(ResultRow)
BATCH = 256


class VerifyError(ValueError):
    """A target that names no config, or a file that cannot be read (exit 2)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One published file that differs from the recomputed one, and how."""

    file: str
    what: str


@dataclass
class Outcome:
    """What verifying some configs found."""

    checked: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)  # JSON fields

    @property
    def matches(self) -> bool:
        """Whether nothing differs."""
        return not self.findings


# -- targets -------------------------------------------------------------------


def _id_from_permalink(path: str) -> str | None:
    trimmed = path.split("#")[0].split("?")[0].rstrip("/") + "/"
    m = PERMALINK.search(trimmed.removesuffix("index.html/"))
    if not m:
        return None
    device, model, quant, ctx, kv = m.groups()
    base = SEP.join((device, model, quant, ctx))
    return base if not kv else f"{base}{SEP}kv-{kv}"


def config_id_of(target: str) -> str | None:
    """The config id an id, permalink or URL names, or None."""
    if SEP in target and "/" not in target:
        return target
    return _id_from_permalink(target)


def read_bytes(path: Path) -> bytes:
    """A published file's bytes; VerifyError (exit 2) if it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise VerifyError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def read_json(path: Path) -> Any:
    """A published JSON file, strictly; VerifyError if it is not JSON at all.

    A key given twice is not unreadable but tampered: :class:`DuplicateKey` passes through.
    """
    try:
        return strict_json.loads_strict(read_bytes(path))
    except strict_json.DuplicateKey:
        raise
    except strict_json.StrictJsonError as exc:
        raise VerifyError(f"{path}: not a readable JSON file: {exc}") from exc


def row_from_json(data: Any) -> ResultRow | None:
    """A published config JSON as a row, if every field is there with its type; else None."""
    if not isinstance(data, dict) or set(data) != set(_HINTS):
        return None
    for name, value in data.items():
        allowed = typing.get_args(_HINTS[name]) or (_HINTS[name],)
        if not any(type(value) is t for t in allowed):  # 1 is not 1.0, True is not 1
            return None
    return ResultRow(**data)


# -- comparing one config ------------------------------------------------------


def compare_fields(published: Any, fresh: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Fields whose published value (or type) differs from the recomputed one."""
    if not isinstance(published, dict):
        return [("(the file)", "not an object", "an object")]
    out = []
    for key in sorted(set(fresh) | set(published)):
        pub, new = published.get(key, "<missing>"), fresh.get(key, "<missing>")
        if not strict_json.same(pub, new):
            out.append((key, pub, new))
    return out


def short_diff(published: str, expected: str, width: int = 36) -> str:
    """Where two texts first differ, with a little context of each."""
    i = next(
        (k for k, (a, b) in enumerate(zip(published, expected, strict=False)) if a != b),
        min(len(published), len(expected)),
    )
    start = max(0, i - width // 2)
    return (
        f"first difference at character {i:,}: published {published[start : i + width]!r}, "
        f"recomputed {expected[start : i + width]!r}"
    )


class Checker:
    """Recomputes configs and compares every file a reader sees of them under ``site``."""

    def __init__(self, cat: Catalog, site: Path, site_url: str, site_name: str) -> None:
        from backpressure.generator.site.methodology import slo_ms
        from backpressure.generator.site.render import make_env

        self.cat, self.site, self.site_url, self.site_name = cat, site, site_url, site_name
        self.keys = InputKeys(cat)
        self.combos = {c.id: c for c in enumerate_combos(cat)}
        self.env = make_env()
        self.slo = slo_ms(cat)
        self.cell = self.env.get_template("pages/_cell.md.j2").module.cell  # type: ignore[attr-defined]
        self._index: dict[str, str] | None = None
        self._home: tuple[str, int, frozenset[str]] | None = None
        self._pages: dict[str, str] = {}

    def combo(self, cid: str) -> Combo:
        """The combo ``cid`` names in this catalog."""
        if cid not in self.combos:
            raise VerifyError(f"config {cid!r} is not in the catalog's sweep")
        return self.combos[cid]

    def recompute(self, cids: list[str]) -> Iterator[tuple[ResultRow, Curves]]:
        """Rows and curves of ``cids``, evaluated as the sweep does (in shared batches).

        Each passes through the sweep's files and back, as the site reads them
        (a float stays a float, curves become what ``curves.jsonl`` gives).
        """
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            for i in range(0, len(cids), BATCH):
                batch = cids[i : i + BATCH]
                todo = [(self.combo(c), self.keys.fingerprint_key(self.combo(c))) for c in batch]
                done = evaluate_many(self.cat, todo)
                (folder / RESULTS).write_text(results_csv(r for r, _ in done), encoding="utf-8")
                rows = {r.config_id: r for r in read_results(folder)}
                for row, curves in done:
                    yield rows[row.config_id], parse_curves(curves_line(curves))

    def published_row(self, cid: str) -> ResultRow | None:
        """The published row of ``cid`` (for the nearest fits other pages list), if readable."""
        path = self.site / "api" / "configs" / f"{cid}.json"
        try:
            return row_from_json(read_json(path)) if path.is_file() else None
        except (VerifyError, strict_json.DuplicateKey):
            return None

    def index_lines(self) -> dict[str, str]:
        """``api/configs.json`` line by config id (checked as strict JSON once)."""
        if self._index is None:
            path = self.site / "api" / "configs.json"
            raw = read_bytes(path)
            try:
                items = strict_json.loads_strict(raw)
            except strict_json.StrictJsonError as exc:
                raise VerifyError(f"{path}: not a readable JSON file: {exc}") from exc
            lines = raw.decode("utf-8").splitlines()[1:-1]
            if not isinstance(items, list) or len(lines) != len(items):
                raise VerifyError(f"{path}: not one config per line as the site writes it")
            self._index = {}
            for line, item in zip(lines, items, strict=True):
                cid = item.get("id") if isinstance(item, dict) else None
                self._index[str(cid)] = line.removesuffix(",")
        return self._index

    def page(self, rel: str) -> str:
        """A published page's text (read once)."""
        if rel not in self._pages:
            self._pages[rel] = read_bytes(self.site / rel).decode("utf-8", errors="replace")
        return self._pages[rel]

    def check(self, row: ResultRow, curves: Curves, rows: Iterable[ResultRow]) -> list[Finding]:
        """Every file a reader sees of ``row``'s config against its recomputation.

        ``rows`` are the other configs of the same model (their nearest fits).
        """
        from backpressure.generator.site import configs
        from backpressure.generator.site.hubs import cell
        from backpressure.generator.site.model import SiteModel
        from backpressure.generator.site.pages import page_path
        from backpressure.generator.site.svg import badge

        cid, found = row.config_id, []
        others = [r for r in rows if r.config_id != cid]
        m = SiteModel(self.cat, [row, *others], {cid: curves}, self.site_url, scenarios=[])
        found += self._check_json(cid, configs.config_json(row))
        title, desc, body = configs.render_config(self.env, m, row, self.slo)
        page_rel = page_path(row.permalink)
        page = self.page(page_rel)
        if page.count(body) != 1:
            at = page.find('<div class="bp-config">')
            found.append(Finding(page_rel, "page differs: " + short_diff(page[max(at, 0) :], body)))
        head = f"<title>{html_escape(title, quote=True)} - {html_escape(self.site_name)}</title>"
        if head not in page or f'content="{html_escape(desc, quote=True)}"' not in page:
            found.append(Finding(page_rel, "title or description differs"))
        svg = badge(*configs.badge_parts(row), row.fits)
        badge_rel = row.permalink + "badge.svg"
        published_svg = read_bytes(self.site / badge_rel).decode("utf-8", errors="replace")
        if published_svg != svg:
            found.append(Finding(badge_rel, "badge differs: " + short_diff(published_svg, svg)))
        line = configs.summary_line(row, self.site_url)
        published = self.index_lines().get(cid)
        if published != line:
            what = "no line for this config" if published is None else short_diff(published, line)
            found.append(Finding("api/configs.json", f"{cid}: {what}"))
        cells = [
            (f"gpu/{row.gpu}/index.html", "../../"),
            (f"model/{row.model}/index.html", "../../"),
        ]
        if self.on_home(row):
            cells.append(("index.html", ""))
        for rel, root in cells:
            html = str(self.cell(cell(row, root)))
            if html not in self.page(rel):
                found.append(Finding(rel, f"{cid}: its cell is not {html[:90]!r}..."))
        return found

    def on_home(self, row: ResultRow) -> bool:
        """Whether the home page's headline table shows this config (generator/site/hubs.py)."""
        from backpressure.generator.site.hubs import (
            HEADLINE_CONTEXT,
            HEADLINE_MODELS,
            HEADLINE_QUANT,
        )

        if self._home is None:
            combos = list(self.combos.values())
            quants = {c.quant for c in combos}
            quant = HEADLINE_QUANT if HEADLINE_QUANT in quants else min(quants, default="")
            ctxs = sorted({c.context for c in combos})
            ctx = (
                HEADLINE_CONTEXT
                if HEADLINE_CONTEXT in ctxs
                else (ctxs[len(ctxs) // 2] if ctxs else 0)
            )
            present = {c.model for c in combos}
            models = [m for m in HEADLINE_MODELS if m in present] or sorted(present)[:4]
            self._home = (quant, ctx, frozenset(models))
        quant, ctx, models = self._home
        return (row.quant, row.context, row.kv_dtype) == (
            quant,
            ctx,
            "auto",
        ) and row.model in models

    def _check_json(self, cid: str, expected: str) -> list[Finding]:
        rel = f"api/configs/{cid}.json"
        raw = read_bytes(self.site / rel)
        if raw == expected.encode("utf-8"):
            return []
        try:
            published = strict_json.loads_strict(raw)
        except strict_json.DuplicateKey as exc:
            return [Finding(rel, f"tampered: {exc}")]
        except strict_json.StrictJsonError as exc:
            raise VerifyError(f"{self.site / rel}: not a readable JSON file: {exc}") from exc
        diffs = compare_fields(published, strict_json.loads_strict(expected))
        detail = "; ".join(
            f"{k}: published {_show(p)}, recomputed {_show(n)}" for k, p, n in diffs[:4]
        )
        return [Finding(rel, f"{len(diffs)} field(s) differ: {detail or 'formatting'}")]


def _show(value: Any) -> str:
    text = strict_json.dumps(value)
    return text if len(text) <= 30 else text[:27] + "..."


# -- whole runs -------------------------------------------------------------


def verify_configs(checker: Checker, cids: list[str]) -> Outcome:
    """Recompute ``cids`` and compare every file of each (nearest fits from the site's rows)."""
    outcome = Outcome()
    fresh = dict(zip(cids, checker.recompute(cids), strict=True))
    models = {checker.combo(c).model for c in cids}
    same_model: dict[str, list[ResultRow]] = {m: [] for m in models}
    for cid, combo in checker.combos.items():
        if combo.model in models:
            row = fresh[cid][0] if cid in fresh else checker.published_row(cid)
            if row is not None:
                same_model[combo.model].append(row)
    for cid in cids:
        row, curves = fresh[cid]
        outcome.checked.append(cid)
        outcome.findings += checker.check(row, curves, same_model[row.model])
    return outcome


def verify_site(checker: Checker, sample: int | None, seed: int) -> Outcome:
    """Every config of the catalog (or a seeded sample) against the site, plus the index's ids."""
    index = checker.index_lines()
    wanted = sorted(checker.combos)
    missing = sorted(set(wanted) - set(index))
    extra = sorted(set(index) - set(wanted))
    cids = (
        wanted
        if sample is None or sample >= len(wanted)
        else sorted(random.Random(seed).sample(wanted, sample))
    )
    outcome = verify_configs(checker, [c for c in cids if c in index])
    if missing:
        outcome.findings.append(
            Finding("api/configs.json", f"{len(missing)} config(s) missing, e.g. {missing[0]}")
        )
    if extra:
        outcome.findings.append(
            Finding(
                "api/configs.json", f"{len(extra)} config(s) the catalog has not, e.g. {extra[0]}"
            )
        )
    return outcome


def verify_json(cat: Catalog, published: Any, cid: str) -> Outcome:
    """A published config JSON on its own: every field, with its type, recomputed."""
    keys = InputKeys(cat)
    combo = next((c for c in enumerate_combos(cat) if c.id == cid), None)
    if combo is None:
        raise VerifyError(f"config {cid!r} is not in the catalog's sweep")
    row, _ = evaluate_many(cat, [(combo, keys.fingerprint_key(combo))])[0]
    outcome = Outcome(checked=[cid])
    outcome.differences = compare_fields(published, row_json(row))
    outcome.findings = [Finding(f"{cid}.json", f"field {k}") for k, _, _ in outcome.differences]
    return outcome


def render(outcome: Outcome, sampled: bool = False) -> str:
    """Human report: one line on a match; per file what differs on a mismatch."""
    n = len(outcome.checked)
    what = (
        "page, badge, JSON, index line and hub cells" if not outcome.differences else "every field"
    )
    if outcome.matches:
        if n == 1:
            return f"verified: {outcome.checked[0]} matches the catalog ({what})"
        scope = "a sample of" if sampled else "all"
        return f"verified: {scope} {n:,} configs match the catalog ({what} of each)"
    if outcome.differences:
        lines = [
            f"MISMATCH: {outcome.checked[0]}: {len(outcome.differences)} field(s) differ",
            f"  {'field':<24} {'published':>24} {'recomputed':>24}",
        ]
        lines += [f"  {k:<24} {_cut(p):>24} {_cut(f):>24}" for k, p, f in outcome.differences]
        return "\n".join(lines)
    head = f"MISMATCH: {len(outcome.findings)} difference(s) in {n:,} config(s) checked"
    return "\n".join([head, *(f"  {f.file}: {f.what}" for f in outcome.findings[:50])])


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else strict_json.dumps(value)
    return text if len(text) <= 24 else text[:21] + "..."
