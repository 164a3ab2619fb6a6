"""Phase one of a build: everything a page shows, gathered into one model before writing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.keys import curves_json
from backpressure.generator.records import Curves, ResultRow
from backpressure.generator.site.data import CurveLines, read_sweep
from backpressure.generator.site.pages import NearestFits
from backpressure.generator.site.scenarios import scenario_contexts

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
    by_gpu: dict[str, list[ResultRow]] = field(default_factory=dict)
    by_model: dict[str, list[ResultRow]] = field(default_factory=dict)
    nearest: dict[str, list[ResultRow]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.rows:
            self.by_gpu.setdefault(r.gpu, []).append(r)
            self.by_model.setdefault(r.model, []).append(r)
        near = NearestFits(self.rows)
        self.nearest = {r.config_id: near(r) for r in self.rows if not r.fits}

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
    return SiteModel(cat, rows, curves, site_url.rstrip("/"), scenarios)
