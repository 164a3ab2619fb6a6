"""Load and validate the whole catalog: validate all, report all, then abort."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backpressure.catalog.errors import CatalogError, Problem, safe_repr
from backpressure.catalog.hf_config import ConfigError, parse_config
from backpressure.catalog.schema import (
    REQUIRED_CALIBRATION,
    Calibration,
    Gpu,
    KvDtype,
    Model,
    Quant,
    Rig,
    Runtime,
    Settings,
    calibration_range,
)
from backpressure.catalog.support import SupportMatrix
from backpressure.catalog.yaml_file import YamlProblem, read_yaml
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
    support: SupportMatrix
    files: dict[str, Path] = field(default_factory=dict)

    def devices(self) -> list[str]:
        """Ids of everything a model can run on: single devices, then rigs."""
        return [*self.gpus, *self.rigs]


def _read_yaml(path: Path, root: Path, problems: list[Problem]) -> Any:
    try:
        return read_yaml(path)
    except YamlProblem as exc:
        problems.append(Problem(_rel(path, root), None, None, str(exc)))
    return None


def misnamed(folder: Path) -> list[Path]:
    """Files that look like catalog YAML but do not end in ``.yaml`` (``x.yml``, ``x.YAML``)."""
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir() if p.suffix.lower() in (".yml", ".yaml") and p.suffix != ".yaml"
    )


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(root.name) / path.relative_to(root))
    except ValueError:
        return str(path)


def _loc_part(part: object) -> str:
    """One step of a field path; a key a person could not read back is shown escaped."""
    text = str(part)
    plain = isinstance(part, int) or (text.isprintable() and text.strip() == text and bool(text))
    return text if plain else safe_repr(text)


def _validation_problems(rel: str, entry: str, exc: ValidationError) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = ".".join(_loc_part(p) for p in err["loc"]) or None
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
    for path in misnamed(root / folder):
        problems.append(
            Problem(_rel(path, root), None, None, "catalog files end in .yaml; rename it")
        )
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


CALIBRATION_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,79}$")  # runtime ids hold dots (llama.cpp)


def _load_calibration(root: Path, problems: list[Problem]) -> dict[str, Calibration]:
    path = root / "calibration.yaml"
    rel = _rel(path, root)
    data = _read_yaml(path, root, problems) if path.exists() else None
    if not isinstance(data, dict):
        problems.append(Problem(rel, None, None, "expected a mapping of constants"))
        return {}
    out = {}
    for name, entry in sorted(data.items(), key=lambda kv: str(kv[0])):
        if not isinstance(name, str) or not CALIBRATION_NAME.match(name):
            problems.append(Problem(rel, safe_repr(str(name))[1:-1], None, "not a constant name"))
            continue
        try:
            cal = Calibration.model_validate(entry)
        except ValidationError as exc:
            problems.extend(_validation_problems(rel, name, exc))
            continue
        low, high, closed = calibration_range(name)
        if not (low <= cal.value if closed else low < cal.value) or cal.value > high:
            bound = "[" if closed else "("
            problems.append(
                Problem(rel, name, "value", f"{cal.value:g} is outside {bound}{low:g}, {high:g}]")
            )
            continue
        out[name] = cal
    return out


def _check_references(
    found: dict[str, dict[str, Any]],
    calibration: dict[str, Calibration],
    settings: Settings | None,
    root: Path,
    problems: list[Problem],
) -> None:
    """Calibration constants the engine always reads, and what the settings name, exist.

    Per-platform and per-link constants are checked by :func:`_check_calibration`.
    """
    cal_file = f"{root.name}/calibration.yaml"
    for name in sorted(REQUIRED_CALIBRATION):
        if name not in calibration and not any(p.entry == name for p in problems):
            problems.append(Problem(cal_file, name, None, "missing: the engine needs it"))
    if settings is None:
        return
    settings_file = f"{root.name}/settings.yaml"
    for i, quant in enumerate(settings.sweep_quants):
        if quant not in found["quants"] and not (root / "quants" / f"{quant}.yaml").is_file():
            problems.append(
                Problem(settings_file, "settings", f"sweep_quants.{i}", f"unknown quant {quant!r}")
            )
    kv = settings.default_kv_dtype
    if kv not in found["kv_dtypes"] and not (root / "kv_dtypes" / f"{kv}.yaml").is_file():
        problems.append(
            Problem(settings_file, "settings", "default_kv_dtype", f"unknown KV dtype {kv!r}")
        )


def _load_settings(root: Path, problems: list[Problem]) -> Settings | None:
    path = root / "settings.yaml"
    data = _read_yaml(path, root, problems) if path.exists() else {}
    try:
        return Settings.model_validate(data or {})
    except ValidationError as exc:
        problems.extend(_validation_problems(_rel(path, root), "settings", exc))
        return None


def _load_support(root: Path, problems: list[Problem]) -> SupportMatrix | None:
    path = root / "support.yaml"
    if not path.exists():
        problems.append(Problem(_rel(path, root), None, None, "file not found"))
        return None
    data = _read_yaml(path, root, problems)
    try:
        return SupportMatrix.model_validate(data)
    except ValidationError as exc:
        problems.extend(_validation_problems(_rel(path, root), "support", exc))
        return None


def _check_support(
    found: dict[str, dict[str, Any]], support: SupportMatrix, root: Path, problems: list[Problem]
) -> None:
    # Every runtime a rule names exists, and every quant's (format, runtime) pair has
    # a rule: a new quant or runtime must say where it runs.
    rel = f"{root.name}/support.yaml"
    for i, rule in enumerate(support.rules):
        if not (root / "runtimes" / f"{rule.runtime}.yaml").is_file():
            problems.append(
                Problem(
                    rel, f"rules.{i}", "runtime", f"unknown runtime id {safe_repr(rule.runtime)}"
                )
            )
    for qid, quant in found["quants"].items():
        for runtime in quant.runtimes:
            if support.rule(runtime, quant.format) is None:
                problems.append(
                    Problem(
                        f"{root.name}/quants/{qid}.yaml",
                        qid,
                        "runtimes",
                        f"support.yaml has no rule for runtime {runtime} and format {quant.format}",
                    )
                )


def _check_calibration(
    found: dict[str, dict[str, Any]],
    calibration: dict[str, Calibration],
    root: Path,
    reported: set[str],
) -> list[Problem]:
    """One problem per platform or link whose calibration constants are missing.

    A constant in ``reported`` is there but invalid, and has its own problem.
    """
    needs: dict[str, set[str]] = {}
    for gid, gpu in found["gpus"].items():
        for key in (f"bandwidth_efficiency_{gpu.platform}", f"layer_overhead_s_{gpu.platform}"):
            needs.setdefault(key, set()).add(f"gpus/{gid}.yaml")
    for rid, rig in found["rigs"].items():
        needs.setdefault(f"allreduce_latency_s_{rig.interconnect}", set()).add(f"rigs/{rid}.yaml")
    for rid, runtime in found["runtimes"].items():
        for gpu in found["gpus"].values():
            backend = (runtime.backends or {}).get(gpu.generation)
            if backend is None or gpu.platform == "cpu":
                continue
            for prefix in ("bandwidth_efficiency", "layer_overhead_s"):
                key = f"{prefix}_{gpu.platform}_{backend}"
                needs.setdefault(key, set()).add(f"runtimes/{rid}.yaml")
    missing: dict[tuple[str, ...], list[str]] = {}
    for key in sorted(k for k in needs if k not in calibration and k not in reported):
        missing.setdefault(tuple(sorted(needs[key])), []).append(key)
    rel = f"{root.name}/calibration.yaml"
    return [
        Problem(rel, None, None, f"missing {', '.join(keys)} (needed by {_some(users)})")
        for users, keys in sorted(missing.items(), key=lambda kv: kv[1])
    ]


def _some(names: tuple[str, ...], shown: int = 3) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def load_catalog(root: Path | None = None) -> Catalog:
    """Read every YAML file under ``root``; raise one CatalogError listing every problem."""
    root = (root or DEFAULT_ROOT).resolve()
    problems: list[Problem] = []
    if not root.is_dir():
        raise CatalogError([Problem(str(root), None, None, "catalog directory not found")])
    found = {folder: _load_kind(root, folder, problems) for folder in KINDS}
    for folder in ("parts", "scenarios"):  # read by the scenario loader
        problems += [
            Problem(_rel(path, root), None, None, "catalog files end in .yaml; rename it")
            for path in misnamed(root / folder)
        ]
    _cross_check(found, root, problems)
    archs = _parse_archs(found["models"], root, problems)
    calibration = _load_calibration(root, problems)
    reported = {p.entry for p in problems if p.entry is not None}
    problems.extend(_check_calibration(found, calibration, root, reported))
    settings = _load_settings(root, problems)
    _check_references(found, calibration, settings, root, problems)
    support = _load_support(root, problems)
    if support is not None:
        _check_support(found, support, root, problems)
    if problems or settings is None or support is None:
        raise CatalogError(problems)
    return Catalog(
        root=root,
        archs=archs,
        calibration=calibration,
        settings=settings,
        support=support,
        **found,
    )
