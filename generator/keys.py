"""Content keys: a SHA-256 of everything an output's bytes are a function of.

Every hash the project keys a cache or a fingerprint by is made here:

- a sweep row's *fingerprint key* (the catalog entries it names, the settings,
  calibration and engine version: what a verifier recomputes) and its *cache
  key* (that plus the code that computes it);
- a config page's content key (its row and curves, the entries it names, its
  nearest-fit rows, the shell, the site's version);
- the code a result depends on, **derived** from the import graph of the module
  that computes it, never listed by hand: change any module the sweep's
  evaluation imports, directly or not, and every row is recomputed; change a
  module only the site imports, and only pages are re-rendered.

Keys are SHA-256 of canonical text (sorted JSON, full-repr floats, paths
relative to the project), never ``hash()``, so they hold across processes.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.util
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from backpressure.engine import ENGINE_VERSION
from backpressure.generator.paths import ROOT

if TYPE_CHECKING:
    from backpressure.catalog.loader import Catalog
    from backpressure.generator.records import ResultRow

PROJECT = "backpressure"
PACKAGES = ("altair", "jinja2", "markdown", "markupsafe", "mkdocs", "mkdocs-material", "pagefind")
MISSING = "-"


def digest(*parts: str) -> str:
    """SHA-256 of ``parts`` joined by a separator no part contains."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def json_digest(obj: Any) -> str:
    """SHA-256 of canonical JSON."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def read_bytes(path: Path) -> bytes:
    """The bytes a key sees of a file (one function, so a test can stand in an edit)."""
    return path.read_bytes()


def files_digest(paths: Iterable[Path], root: Path | None = None) -> str:
    """SHA-256 over the names (relative to ``root``, the project) and bytes of ``paths``."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.relative_to(root or ROOT).as_posix().encode("utf-8") + b"\0")
        h.update(read_bytes(path))
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


def depth(permalink: str) -> int:
    """How many directories deep a permalink sits."""
    return len([p for p in permalink.split("/") if p])


# -- code: derived from the import graph --------------------------------------


def _source(module: str) -> Path | None:
    """The source file of a project module, or None if ``module`` is not one."""
    if module != PROJECT and not module.startswith(PROJECT + "."):
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def _imports(path: Path) -> set[str]:
    """Project modules named by the import statements of ``path`` (lazy ones included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            # ``from package import module`` names a module too
            names.update(f"{node.module}.{a.name}" for a in node.names)
    found: set[str] = set()
    for name in names:
        parts = name.split(".")
        # a module's parent packages run their __init__ first
        found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {n for n in found if _source(n) is not None}


@functools.cache
def code_files(*modules: str) -> tuple[Path, ...]:
    """Source files of ``modules`` and of every project module they import, transitively.

    Imports inside functions and under ``TYPE_CHECKING`` count too: a key may
    change when it need not, never the other way round.
    """
    todo = list(modules)
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _source(name)
        if path is None:
            raise ValueError(f"{name!r} is not a module of {PROJECT}")
        seen[name] = path
        todo.extend(_imports(path) - set(seen))
    return tuple(sorted(set(seen.values())))


def code_digest(*modules: str) -> str:
    """Hash of the source of ``modules`` and everything they import (:func:`code_files`)."""
    return files_digest(code_files(*modules), ROOT)


# -- catalog entries ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entities:
    """Digest of every catalog entry a config can name, by id; ``shared`` covers the rest.

    A rig's digest includes its base GPU's; ``shared`` is the calibration, the
    settings and the engine version.
    """

    devices: dict[str, str]
    models: dict[str, str]
    quants: dict[str, str]
    runtimes: dict[str, str]
    kv_dtypes: dict[str, str]
    shared: str

    def of(self, device: str, model: str, quant: str, runtime: str, kv_dtype: str) -> str:
        """Digest of the entries a config names (an entry gone from the catalog counts too)."""
        return digest(
            self.devices.get(device, MISSING),
            self.models.get(model, MISSING),
            self.quants.get(quant, MISSING),
            self.runtimes.get(runtime, MISSING),
            self.kv_dtypes.get(kv_dtype, MISSING),
        )


def entities(cat: Catalog) -> Entities:
    """Digests of the catalog's entries."""

    def dump(table: Mapping[str, Any]) -> dict[str, str]:
        return {k: json_digest(v.model_dump(mode="json")) for k, v in table.items()}

    gpus = dump(cat.gpus)
    rigs = {
        k: json_digest([v.model_dump(mode="json"), gpus.get(v.gpu, MISSING)])
        for k, v in cat.rigs.items()
    }
    shared = json_digest(
        {
            "calibration": {k: v.model_dump(mode="json") for k, v in cat.calibration.items()},
            "settings": cat.settings.model_dump(mode="json"),
            "engine_version": ENGINE_VERSION,
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


# -- sweep rows ----------------------------------------------------------------

# The module that turns a combination into its row and curves: its import graph
# is the code every row depends on.
SWEEP_MODULE = "backpressure.generator.sweep.evaluate"


class Config(Protocol):
    """What names one config: its id and the catalog entries it is made of."""

    # Read-only members, so that a frozen dataclass such as a sweep combo is one.
    @property
    def id(self) -> str: ...  # noqa: D102
    @property
    def device(self) -> str: ...  # noqa: D102
    @property
    def model(self) -> str: ...  # noqa: D102
    @property
    def quant(self) -> str: ...  # noqa: D102
    @property
    def runtime(self) -> str: ...  # noqa: D102
    @property
    def kv_dtype(self) -> str: ...  # noqa: D102


class InputKeys:
    """Content hashes of everything a config's row depends on."""

    def __init__(self, cat: Catalog) -> None:
        self.entities = entities(cat)
        self.code = code_digest(SWEEP_MODULE)

    def fingerprint_key(self, c: Config) -> str:
        """Hash of the inputs and engine version (not the code): what a verifier recomputes."""
        e = self.entities
        parts = [
            e.devices[c.device],
            e.models[c.model],
            e.quants[c.quant],
            e.runtimes[c.runtime],
            e.kv_dtypes[c.kv_dtype],
            e.shared,
            c.id,
        ]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    def cache_key(self, c: Config) -> str:
        """The fingerprint key plus the code: any change to the math recomputes."""
        return hashlib.sha256(f"{self.fingerprint_key(c)}|{self.code}".encode()).hexdigest()


def row_fingerprint(inputs_key: str, outputs: Mapping[str, Any]) -> str:
    """Hash of inputs, engine version and every published output of a row."""
    return json_digest({"inputs": inputs_key, "version": ENGINE_VERSION, "outputs": dict(outputs)})


def seed_for(config_id: str, base: int) -> int:
    """Per-config seed from content (sha256 of the id), never ``hash()``."""
    raw = hashlib.sha256(config_id.encode()).digest()
    return (int.from_bytes(raw[:4], "big") ^ base) & 0xFFFFFFFF


# -- site pages --------------------------------------------------------------

# The modules a config page's bytes pass through (the sweep's own reach a page
# only through its row and curves) and those a scenario page's run does.
CONFIG_PAGE_MODULE = "backpressure.generator.site.configs"
SCENARIO_MODULE = "backpressure.generator.site.scenarios"


def site_version(templates: Path, chart_specs: Any) -> str:
    """Hash of the page code, every template and asset, the chart specs and the packages."""
    tree = [p for p in templates.rglob("*") if p.is_file()]
    return digest(
        code_digest(CONFIG_PAGE_MODULE),
        files_digest(tree, templates),
        json_digest(chart_specs),
        json_digest(package_versions()),
    )


def row_digest(row: ResultRow) -> str:
    """Hash of every field of a row (the dataclass repr writes floats in full)."""
    return hashlib.sha256(repr(row).encode("utf-8")).hexdigest()


def curves_digest(text: str) -> str:
    """Hash of one config's canonical curves text (empty if it has none)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def config_keys(
    rows: Iterable[ResultRow],
    curve_texts: Mapping[str, str],
    nearest: Mapping[str, list[ResultRow]],
    ent: Entities,
    base: Mapping[int, str],
) -> dict[str, str]:
    """The content key of every config page, by config id.

    ``curve_texts`` holds each config's canonical curves line; ``nearest`` each
    non-fitting row's nearest fits; ``base`` the key part every page at a
    permalink depth shares (site version, shell, settings).
    """
    refs: dict[str, str] = {}

    def ref(r: ResultRow) -> str:
        if r.config_id not in refs:
            refs[r.config_id] = digest(
                row_digest(r), ent.of(r.gpu, r.model, r.quant, r.runtime, r.kv_dtype)
            )
        return refs[r.config_id]

    out = {}
    for r in rows:
        out[r.config_id] = digest(
            base[depth(r.permalink)],
            ref(r),
            curves_digest(curve_texts.get(r.config_id, "")),
            *(ref(n) for n in nearest.get(r.config_id, ())),
        )
    return out


def curves_json(curves: Any) -> str:
    """Canonical text of a :class:`~backpressure.generator.records.Curves` not read from a file."""
    return json.dumps(dataclasses.asdict(curves), sort_keys=True)
