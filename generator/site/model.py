"""Phase one of a build: everything a page shows, gathered into one model before writing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.keys import code_digest, curves_json, digest, files_digest, json_digest
from backpressure.generator.records import Curves, ResultRow
from backpressure.generator.rig.data import rig_files
from backpressure.generator.site.data import CurveLines, read_sweep
from backpressure.generator.site.pages import NearestFits
from backpressure.generator.site.scenarios import scenario_contexts
from backpressure.generator.site.siblings import Siblings, catalog_memory

if TYPE_CHECKING:
    from backpressure.generator.site.publish.cache import RenderCache


@dataclass
class SiteModel:
    """Everything gathered before writing: rows grouped every way a page needs them."""

    cat: Catalog
    rows: list[ResultRow]
    curves: Mapping[str, Curves]
    site_url: str
    scenarios: list[dict[str, Any]] | None = None
    accuracy: dict[str, Any] | None = None
    by_gpu: dict[str, list[ResultRow]] = field(default_factory=dict)
    by_model: dict[str, list[ResultRow]] = field(default_factory=dict)
    nearest: dict[str, list[ResultRow]] = field(default_factory=dict)
    rig: dict[str, str] | None = None  # the rig builder's data files, by site path

    def __post_init__(self) -> None:
        for r in self.rows:
            self.by_gpu.setdefault(r.gpu, []).append(r)
            self.by_model.setdefault(r.model, []).append(r)
        near = NearestFits(self.rows)
        self.nearest = {r.config_id: near(r) for r in self.rows if not r.fits}

    @cached_property
    def model_configs(self) -> dict[str, list[dict[str, Any]]]:
        """Per model, its configs as ``api/models/<id>.json`` lists them (computed once)."""
        from backpressure.generator.site.model_json import model_configs

        return model_configs(self.cat, self.rows, self.curves, self.site_url)

    @cached_property
    def siblings(self) -> Siblings:
        """Every config's siblings (the links on its page), indexed once."""
        return Siblings(self.rows, catalog_memory(self.cat))

    def curve_texts(self) -> Mapping[str, str]:
        """Each config's canonical curves text, as its page key hashes it."""
        if isinstance(self.curves, CurveLines):
            return self.curves.lines
        return {cid: curves_json(c) for cid, c in self.curves.items()}


def gather(
    cat: Catalog, results_dir: Path, site_url: str = "", cache: RenderCache | None = None
) -> SiteModel:
    """Phase one: read the sweep's tables, group them, run (or recall) the scenarios."""
    rows, curves = read_sweep(results_dir)
    scenarios = scenario_contexts(cat.root / "scenarios", cache, cat)
    model = SiteModel(
        cat, rows, curves, site_url.rstrip("/"), scenarios, accuracy_context(cat, cache)
    )
    model.rig = rig_files(cat, rows, cache)
    return model


ACCURACY_MODULE = "backpressure.generator.accuracy.page"


def _accuracy(cat: Catalog) -> dict[str, Any]:
    from backpressure.generator.accuracy.page import decode_context, kv_context, serving_context

    return {"serving": serving_context(cat), "decode": decode_context(cat), "kv": kv_context(cat)}


def accuracy_context(cat: Catalog, cache: RenderCache | None = None) -> dict[str, Any]:
    """The accuracy page's numbers: published runs replayed.

    A second or two of work, cached by the code, the data files and the catalog.
    """
    from backpressure.generator.accuracy.rows import DATA

    if cache is None:
        return _accuracy(cat)
    key = digest(
        code_digest(ACCURACY_MODULE),
        files_digest(sorted(p for p in DATA.iterdir() if p.is_file()), DATA),
        json_digest(
            {
                kind: {k: v.model_dump(mode="json") for k, v in table.items()}
                for kind, table in (
                    ("gpus", cat.gpus),
                    ("rigs", cat.rigs),
                    ("models", cat.models),
                    ("quants", cat.quants),
                    ("runtimes", cat.runtimes),
                    ("kv_dtypes", cat.kv_dtypes),
                    ("calibration", cat.calibration),
                )
            }
        ),
    )
    ctx = cache.doc("accuracy", key)
    if ctx is None:
        ctx = _accuracy(cat)
        cache.put_doc("accuracy", key, ctx)
    return dict(ctx)
