"""Recompute one config and compare every file a reader sees of it with the published one.

The expected files are made with the site's own code (generator/site), from the
recomputed row and curves: the config's line of ``api/models/<model>.json``
(byte for byte), its anchored row on the GPU x model page, and where the config
has a page (it fits) the page body (numbers, arithmetic, chart data, sibling
links), its title and description and the badge; a config that does not fit
must have neither. Then its cells on the GPU hub, the model hub and the home page.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Iterator
from html import escape as html_escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.ci import strict_json
from backpressure.generator.ci.published import (
    Finding,
    VerifyError,
    compare_fields,
    read_bytes,
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
from backpressure.generator.site.escape import json_text
from backpressure.generator.site.model_json import model_configs
from backpressure.generator.site.siblings import Published
from backpressure.generator.sweep.combos import Combo, enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate_many

if TYPE_CHECKING:
    from backpressure.generator.site.model import SiteModel

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
        self._lines: dict[str, dict[str, str]] = {}
        self._home: tuple[str, int, frozenset[str]] | None = None
        self._pages: dict[str, str] = {}
        self.pair_row = self.env.get_template("_pair_row.html.j2").module.pair_row  # type: ignore[attr-defined]

    def combo(self, cid: str) -> Combo:
        """The combo ``cid`` names in this catalog."""
        if cid not in self.combos:
            raise VerifyError(f"config {cid!r} is not in the catalog's sweep")
        return self.combos[cid]

    def recompute(self, cids: list[str]) -> Iterator[tuple[ResultRow, Curves]]:
        """Rows and curves of ``cids`` as the site reads them (see :func:`recompute`)."""
        return recompute(self.cat, self.keys, [self.combo(c) for c in cids])

    def lines(self, fresh: Iterable[tuple[ResultRow, Curves]]) -> dict[str, str]:
        """By config id, the line its model's JSON index should hold for ``fresh``."""
        items = expected_items(self.cat, fresh, self.site_url)
        return {cid: json_text(item) for cid, item in items.items()}

    def model_lines(self, model: str) -> dict[str, str]:
        """``api/models/<model>.json``'s line by config id (read strictly, once).

        The file must be what the site writes: strict JSON, its frame as the
        catalog names the model, one config per line.
        """
        from backpressure.generator.site.model_api import frame, model_file

        if model not in self._lines:
            path = self.site / model_file(model)
            raw = read_bytes(path)
            try:
                data = strict_json.loads_strict(raw)
            except strict_json.DuplicateKey:
                # Tampered, not unreadable: the line holding the key twice is reported as such.
                data = json.loads(raw)
            except strict_json.StrictJsonError as exc:
                raise VerifyError(f"{path}: not a readable JSON file: {exc}") from exc
            text = raw.decode("utf-8")
            head, tail = frame(self.cat, model)
            items = data.get("configs") if isinstance(data, dict) else None
            if not (text.startswith(head) and text.endswith(tail) and isinstance(items, list)):
                raise VerifyError(f"{path}: not a model's JSON index as the site writes it")
            body = text[len(head) : len(text) - len(tail)]
            lines = body.split(",\n") if body else []
            if len(lines) != len(items):
                raise VerifyError(f"{path}: not one config per line as the site writes it")
            self._lines[model] = {
                str(item.get("id") if isinstance(item, dict) else None): line
                for line, item in zip(lines, items, strict=True)
            }
        return self._lines[model]

    def published_refs(self, model: str) -> list[Published]:
        """The model's configs as its JSON index publishes them (what sibling links need)."""
        from backpressure.generator.records import permalink

        refs = []
        for line in self.model_lines(model).values():
            try:
                item = strict_json.loads_strict(line.encode("utf-8"))
                gpu, quant, ctx, kv = item["gpu"], item["quant"], item["context"], item["kv_dtype"]
                fits = item["fits"]
                if not (isinstance(ctx, int) and isinstance(fits, bool)):
                    raise TypeError("context or fits")
                refs.append(
                    Published(
                        item["id"],
                        permalink(gpu, model, quant, ctx, kv),
                        gpu,
                        model,
                        quant,
                        ctx,
                        kv,
                        fits,
                    )
                )
            except (KeyError, TypeError, strict_json.StrictJsonError):
                continue  # its own check reports the line
        return refs

    def page(self, rel: str) -> str:
        """A published page's text (read once)."""
        if rel not in self._pages:
            self._pages[rel] = read_bytes(self.site / rel).decode("utf-8", errors="replace")
        return self._pages[rel]

    def check(
        self, row: ResultRow, curves: Curves, refs: Iterable[Published], line: str
    ) -> list[Finding]:
        """Every file a reader sees of ``row``'s config against its recomputation.

        ``refs`` are the model's configs as published (the page's sibling links),
        ``line`` the config's expected line of its model's JSON index (:meth:`lines`).
        """
        from backpressure.generator.site import configs
        from backpressure.generator.site.hubs import cell
        from backpressure.generator.site.links import has_page, pair_dir
        from backpressure.generator.site.model import SiteModel
        from backpressure.generator.site.pages import page_path
        from backpressure.generator.site.pair_pages import row_context
        from backpressure.generator.site.siblings import Siblings, catalog_memory
        from backpressure.generator.site.svg import badge

        cid, found = row.config_id, []
        found += self._check_line(row, line)
        pair_rel = page_path(pair_dir(row.gpu, row.model))
        html = str(self.pair_row(row_context(self.cat, row)))
        if self.page(pair_rel).count(html) != 1:
            found.append(Finding(pair_rel, f"{cid}: its row is not {html[:90]!r}..."))
        page_rel = page_path(row.permalink)
        if has_page(row):
            m = SiteModel(self.cat, [row], {cid: curves}, self.site_url, scenarios=[])
            mine = Published(
                cid,
                row.permalink,
                row.gpu,
                row.model,
                row.quant,
                row.context,
                row.kv_dtype,
                row.fits,
            )
            others = [r for r in refs if r.config_id != cid]
            m.siblings = Siblings([mine, *others], catalog_memory(self.cat))
            found += self._check_page(m, row, page_rel)
            svg = badge(*configs.badge_parts(row), row.breaking_rps is not None)
            badge_rel = row.permalink + "badge.svg"
            published_svg = read_bytes(self.site / badge_rel).decode("utf-8", errors="replace")
            if published_svg != svg:
                found.append(Finding(badge_rel, "badge differs: " + short_diff(published_svg, svg)))
        elif (self.site / page_rel).exists() or (self.site / row.permalink / "badge.svg").exists():
            found.append(Finding(page_rel, f"{cid} does not fit, yet has a page or badge"))
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

    def _check_page(self, m: SiteModel, row: ResultRow, page_rel: str) -> list[Finding]:
        """A config page's body, title and description against the recomputed ones."""
        from backpressure.generator.site import configs

        found = []
        title, desc, body = configs.render_config(self.env, m, row, self.lim)
        page = self.page(page_rel)
        if page.count(body) != 1:
            at = page.find('<div class="bp-config">')
            found.append(Finding(page_rel, "page differs: " + short_diff(page[max(at, 0) :], body)))
        head = f"<title>{html_escape(title, quote=True)} - {html_escape(self.site_name)}</title>"
        if head not in page or f'content="{html_escape(desc, quote=True)}"' not in page:
            found.append(Finding(page_rel, "title or description differs"))
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

    def _check_line(self, row: ResultRow, expected: str) -> list[Finding]:
        """The config's line of its model's JSON index, byte for byte, else field by field."""
        from backpressure.generator.site.model_api import model_file

        rel = model_file(row.model)
        published = self.model_lines(row.model).get(row.config_id)
        if published is None:
            return [Finding(rel, f"{row.config_id}: no line for this config")]
        if published == expected:
            return []
        try:
            item = strict_json.loads_strict(published.encode("utf-8"))
        except strict_json.DuplicateKey as exc:
            return [Finding(rel, f"{row.config_id}: tampered: {exc}")]
        diffs = compare_fields(item, strict_json.loads_strict(expected.encode("utf-8")))
        detail = "; ".join(
            f"{k}: published {show_value(p)}, recomputed {show_value(n)}" for k, p, n in diffs[:4]
        )
        what = (
            f"{len(diffs)} field(s) differ: {detail}" if diffs else short_diff(published, expected)
        )
        return [Finding(rel, f"{row.config_id}: {what}")]


def recompute(
    cat: Catalog, keys: InputKeys, combos: list[Combo]
) -> Iterator[tuple[ResultRow, Curves]]:
    """Rows and curves of ``combos``, evaluated as the sweep does (in shared batches).

    Each passes through the sweep's files and back, as the site reads them
    (a float stays a float, curves become what ``curves.jsonl`` gives).
    """
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for i in range(0, len(combos), BATCH):
            done = evaluate_many(cat, [(c, keys.fingerprint_key(c)) for c in combos[i : i + BATCH]])
            (folder / RESULTS).write_text(results_csv(r for r, _ in done), encoding="utf-8")
            rows = {r.config_id: r for r in read_results(folder)}
            for row, curves in done:
                yield rows[row.config_id], parse_curves(curves_line(curves))


def expected_items(
    cat: Catalog, fresh: Iterable[tuple[ResultRow, Curves]], site_url: str
) -> dict[str, dict[str, Any]]:
    """By config id, its object in its model's JSON index, made from recomputed rows and curves."""
    pairs = list(fresh)
    by_model = model_configs(
        cat, [r for r, _ in pairs], {r.config_id: c for r, c in pairs}, site_url
    )
    return {item["id"]: item for items in by_model.values() for item in items}
