"""Recompute one config and compare every file a reader sees of it with the published one.

The expected files are made with the site's own code (generator/site), from the
recomputed row and curves: the JSON, the page body (numbers, arithmetic, chart
data, nearest fits), its title and description, the badge, the
``api/configs.json`` line and the cells on the GPU hub, the model hub and the
home page.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from html import escape as html_escape
from pathlib import Path

from backpressure.catalog.loader import Catalog
from backpressure.generator.ci import strict_json
from backpressure.generator.ci.published import (
    Finding,
    VerifyError,
    compare_fields,
    read_bytes,
    read_json,
    row_from_json,
    short_diff,
    show_value,
)
from backpressure.generator.keys import InputKeys
from backpressure.generator.records import Curves, ResultRow
from backpressure.generator.results_io import (
    RESULTS,
    curves_line,
    parse_curves,
    read_results,
    results_csv,
)
from backpressure.generator.sweep.combos import Combo, enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate_many

BATCH = 256


class Checker:
    """Recomputes configs and compares every file a reader sees of them under ``site``."""

    def __init__(self, cat: Catalog, site: Path, site_url: str, site_name: str) -> None:
        from backpressure.generator.site.pages import Limits
        from backpressure.generator.site.render import make_env

        self.cat, self.site, self.site_url, self.site_name = cat, site, site_url, site_name
        self.keys = InputKeys(cat)
        self.combos = {c.id: c for c in enumerate_combos(cat)}
        self.env = make_env()
        self.lim = Limits.of(cat)
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
        title, desc, body = configs.render_config(self.env, m, row, self.lim)
        page_rel = page_path(row.permalink)
        page = self.page(page_rel)
        if page.count(body) != 1:
            at = page.find('<div class="bp-config">')
            found.append(Finding(page_rel, "page differs: " + short_diff(page[max(at, 0) :], body)))
        head = f"<title>{html_escape(title, quote=True)} - {html_escape(self.site_name)}</title>"
        if head not in page or f'content="{html_escape(desc, quote=True)}"' not in page:
            found.append(Finding(page_rel, "title or description differs"))
        svg = badge(*configs.badge_parts(row), row.breaking_rps is not None)
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
        quant, ctx, shown = self._home
        return (row.quant, row.context, row.kv_dtype) == (quant, ctx, "auto") and row.model in shown

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
            f"{k}: published {show_value(p)}, recomputed {show_value(n)}" for k, p, n in diffs[:4]
        )
        return [Finding(rel, f"{len(diffs)} field(s) differ: {detail or 'formatting'}")]
