"""Load and validate the whole catalog: validate all, report all, then abort."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from backpressure.catalog.errors import CatalogError, Problem, safe_repr
from backpressure.catalog.hf_config import ConfigError, parse_config
from backpressure.catalog.schema import (
    Calibration,
    Gpu,
    KvDtype,
    Model,
    Quant,
    Rig,
    Runtime,
    Settings,
)
from backpressure.engine.arch import ModelArch
from pydantic import BaseModel, ValidationError

DEFAULT_ROOT = Path(__file__).resolve().parent

KINDS: dict[str, type[BaseModel]] = {
    "gpus": Gpu,
    "rigs": Rig,
    "models": Model,
    "quants": Quant,
    "kv_dtypes": KvDtype,
    "runtimes": Runtime,
}


@dataclass(frozen=True)
class Catalog:
    """Every validated entity, keyed by id in sorted order, plus parsed architectures."""

    root: Path
    gpus: dict[str, Gpu]
    rigs: dict[str, Rig]
    models: dict[str, Model]
    quants: dict[str, Quant]
    kv_dtypes: dict[str, KvDtype]
    runtimes: dict[str, Runtime]
    archs: dict[str, ModelArch]
    calibration: dict[str, Calibration]
    settings: Settings
    files: dict[str, Path] = field(default_factory=dict)

    def devices(self) -> list[str]:
        """Ids of everything a model can run on: single devices, then rigs."""
        return [*self.gpus, *self.rigs]


def _read_yaml(path: Path, root: Path, problems: list[Problem]) -> Any:
    rel = _rel(path, root)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problems.append(Problem(rel, None, None, f"malformed YAML{where}"))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(rel, None, None, f"cannot read file: {exc}"))
    return None


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(root.name) / path.relative_to(root))
    except ValueError:
        return str(path)


def _validation_problems(rel: str, entry: str, exc: ValidationError) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or None
        msg = err["msg"].removeprefix("Value error, ")
        if loc is None and ":" in msg:
            loc, msg = (part.strip() for part in msg.split(":", 1))
        out.append(Problem(rel, entry, loc, msg))
    return out


def validate_entity(
    kind: type[BaseModel], data: Any, rel: str, stem: str, problems: list[Problem]
) -> BaseModel | None:
    """Validate one entry; record problems (naming file, entry, field) instead of raising."""
    if not isinstance(data, dict):
        problems.append(Problem(rel, None, None, "expected a mapping of fields at the top level"))
        return None
    raw_id = data.get("id")
    entry = safe_repr(raw_id)[1:-1] if isinstance(raw_id, str) else stem
    try:
        obj = kind.model_validate(data)
    except ValidationError as exc:
        problems.extend(_validation_problems(rel, entry, exc))
        return None
    if obj.id != stem:  # type: ignore[attr-defined]
        problems.append(Problem(rel, entry, "id", f"must equal the file name '{stem}'"))
        return None
    return obj


def _load_kind(root: Path, folder: str, problems: list[Problem]) -> dict[str, Any]:
    kind = KINDS[folder]
    out: dict[str, Any] = {}
    for path in sorted((root / folder).glob("*.yaml")):
        rel = _rel(path, root)
        data = _read_yaml(path, root, problems)
        if data is None and not any(p.file == rel for p in problems):
            problems.append(Problem(rel, None, None, "file is empty"))
        if data is None:
            continue
        obj = validate_entity(kind, data, rel, path.stem, problems)
        if obj is not None:
            out[obj.id] = obj  # type: ignore[attr-defined]
    return out


def _cross_check(found: dict[str, dict[str, Any]], root: Path, problems: list[Problem]) -> None:
    # Check references against the files present, so one broken GPU file does not
    # also report every rig built from it.
    gpu_files = {p.stem for p in (root / "gpus").glob("*.yaml")}
    for rid, rig in found["rigs"].items():
        if rig.gpu not in gpu_files:
            problems.append(
                Problem(
                    f"{root.name}/rigs/{rid}.yaml",
                    rid,
                    "gpu",
                    f"unknown GPU id {safe_repr(rig.gpu)}",
                )
            )
        if rid in found["gpus"]:
            problems.append(
                Problem(
                    f"{root.name}/rigs/{rid}.yaml", rid, "id", "duplicate id: a GPU has the same id"
                )
            )
    for folder in ("quants", "kv_dtypes"):
        for eid, ent in found[folder].items():
            for runtime in ent.runtimes:
                if not (root / "runtimes" / f"{runtime}.yaml").is_file():
                    problems.append(
                        Problem(
                            f"{root.name}/{folder}/{eid}.yaml",
                            eid,
                            "runtimes",
                            f"unknown runtime id {safe_repr(runtime)}",
                        )
                    )


def _parse_archs(
    models: dict[str, Model], root: Path, problems: list[Problem]
) -> dict[str, ModelArch]:
    archs: dict[str, ModelArch] = {}
    for mid, model in models.items():
        try:
            archs[mid] = parse_config(model.config)
        except ConfigError as exc:
            problems.append(
                Problem(
                    f"{root.name}/models/{mid}.yaml",
                    mid,
                    "config",
                    str(exc).removeprefix("config.json: "),
                )
            )
    return archs


def _load_calibration(root: Path, problems: list[Problem]) -> dict[str, Calibration]:
    path = root / "calibration.yaml"
    data = _read_yaml(path, root, problems) if path.exists() else None
    if not isinstance(data, dict):
        problems.append(Problem(_rel(path, root), None, None, "expected a mapping of constants"))
        return {}
    out = {}
    for name in sorted(data):
        try:
            out[name] = Calibration.model_validate(data[name])
        except ValidationError as exc:
            problems.extend(_validation_problems(_rel(path, root), str(name), exc))
    return out


def _load_settings(root: Path, problems: list[Problem]) -> Settings | None:
    path = root / "settings.yaml"
    data = _read_yaml(path, root, problems) if path.exists() else {}
    try:
        return Settings.model_validate(data or {})
    except ValidationError as exc:
        problems.extend(_validation_problems(_rel(path, root), "settings", exc))
        return None


def load_catalog(root: Path | None = None) -> Catalog:
    """Read every YAML file under ``root``; raise one CatalogError listing every problem."""
    root = (root or DEFAULT_ROOT).resolve()
    problems: list[Problem] = []
    if not root.is_dir():
        raise CatalogError([Problem(str(root), None, None, "catalog directory not found")])
    found = {folder: _load_kind(root, folder, problems) for folder in KINDS}
    _cross_check(found, root, problems)
    archs = _parse_archs(found["models"], root, problems)
    calibration = _load_calibration(root, problems)
    settings = _load_settings(root, problems)
    if problems or settings is None:
        raise CatalogError(problems)
    return Catalog(root=root, archs=archs, calibration=calibration, settings=settings, **found)
