"""Content keys: a hash of everything a page's bytes are a function of.

An incremental build re-renders a page only when its key changes. A config
page's key covers its results row and curves, the catalog entries the row names
(device, with a rig's base GPU; model; quant; runtime; KV dtype), the
calibration and settings, its nearest-fit rows and their entries, the mkdocs
shell it is wrapped in, and the site's version: the rendering code, every
template and asset, the chart specs and the versions of the packages that shape
the bytes. So an edit to one GPU re-renders that GPU's configs (and the
non-fitting configs that list them as nearest fits); an edit to a template or
to the code re-renders everything.

Keys are SHA-256 of canonical text (sorted JSON, full-repr floats, paths
relative to the project), never ``hash()``, so they hold across processes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from catalog.loader import Catalog
from generator import charts
from generator.records import Curves, ResultRow
from generator.site_data import CurveLines

GENERATOR = Path(__file__).resolve().parent
ROOT = GENERATOR.parent
# The modules a page's bytes pass through. The sweep's own modules are left out:
# whatever they change reaches a page through its row and curves.
SITE_CODE = (
    *sorted(GENERATOR.glob("site*.py")),
    *(GENERATOR / f"{name}.py" for name in ("assemble", "charts", "pages", "records", "render")),
    GENERATOR / "results_io.py",
)
PACKAGES = ("altair", "jinja2", "markdown", "markupsafe", "mkdocs", "mkdocs-material", "pagefind")
MISSING = "-"


def digest(*parts: str) -> str:
    """SHA-256 of ``parts`` joined by a separator no part contains."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def json_digest(obj: Any) -> str:
    """SHA-256 of canonical JSON."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def files_digest(paths: Iterable[Path], root: Path | None = None) -> str:
    """SHA-256 over the names (relative to ``root``, the project) and bytes of ``paths``."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.relative_to(root or ROOT).as_posix().encode("utf-8") + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that shape the site's bytes."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = MISSING
    return out


def site_version(templates: Path) -> str:
    """Hash of the rendering code, every template and asset, the chart specs and the packages."""
    tree = [p for p in templates.rglob("*") if p.is_file()]
    return digest(
        files_digest(SITE_CODE),
        files_digest(tree, templates),
        json_digest(charts.chart_specs()),
        json_digest(package_versions()),
    )


@dataclass(frozen=True, slots=True)
class Entities:
    """Digest of every catalog entry a row can name, by id; ``shared`` covers the rest."""

    devices: dict[str, str]
    models: dict[str, str]
    quants: dict[str, str]
    runtimes: dict[str, str]
    kv_dtypes: dict[str, str]
    shared: str

    def of(self, row: ResultRow) -> str:
        """Digest of the entries ``row`` names (an entry gone from the catalog counts too)."""
        return digest(
            self.devices.get(row.gpu, MISSING),
            self.models.get(row.model, MISSING),
            self.quants.get(row.quant, MISSING),
            self.runtimes.get(row.runtime, MISSING),
            self.kv_dtypes.get(row.kv_dtype, MISSING),
        )


def entities(cat: Catalog) -> Entities:
    """Digests of the catalog's entries; a rig's includes its base GPU's."""

    def dump(table: Mapping[str, Any]) -> dict[str, str]:
        return {k: json_digest(v.model_dump(mode="json")) for k, v in table.items()}

    gpus = dump(cat.gpus)
    rigs = {
        k: digest(json_digest(v.model_dump(mode="json")), gpus.get(v.gpu, MISSING))
        for k, v in cat.rigs.items()
    }
    shared = json_digest(
        {
            "calibration": {k: v.model_dump(mode="json") for k, v in cat.calibration.items()},
            "settings": cat.settings.model_dump(mode="json"),
        }
    )
    return Entities(
        {**gpus, **rigs},
        dump(cat.models),
        dump(cat.quants),
        dump(cat.runtimes),
        dump(cat.kv_dtypes),
        shared,
    )


def depth(permalink: str) -> int:
    """How many directories deep a permalink sits."""
    return len([p for p in permalink.split("/") if p])


def row_digest(row: ResultRow) -> str:
    """Hash of every field of a row (the dataclass repr writes floats in full)."""
    return hashlib.sha256(repr(row).encode("utf-8")).hexdigest()


def curves_text(curves: Mapping[str, Curves], cid: str) -> str:
    """The canonical text of one config's curves (empty if it has none)."""
    if isinstance(curves, CurveLines):
        return curves.lines.get(cid, "")
    c = curves.get(cid)
    return "" if c is None else json.dumps(dataclasses.asdict(c), sort_keys=True)


def config_keys(
    rows: Iterable[ResultRow],
    curves: Mapping[str, Curves],
    nearest: Mapping[str, list[ResultRow]],
    ent: Entities,
    base: Mapping[int, str],
) -> dict[str, str]:
    """The content key of every config page, by config id.

    ``nearest`` holds each non-fitting row's nearest fits; ``base`` the key part
    every page at a permalink depth shares (site version, shell, settings).
    """
    refs: dict[str, str] = {}

    def ref(r: ResultRow) -> str:
        if r.config_id not in refs:
            refs[r.config_id] = digest(row_digest(r), ent.of(r))
        return refs[r.config_id]

    out = {}
    for r in rows:
        out[r.config_id] = digest(
            base[depth(r.permalink)],
            ref(r),
            hashlib.sha256(curves_text(curves, r.config_id).encode("utf-8")).hexdigest(),
            *(ref(n) for n in nearest.get(r.config_id, ())),
        )
    return out
