"""One config of the sweep: its combination, the hashes of its inputs, its row and curves.

Enumerates what the catalog allows, hashes everything a row depends on (the
catalog entries, the settings, the engine version and the code), and computes
rows: capacity, then the load sweep in shared tick loops.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import engine
from catalog.loader import Catalog
from engine.results import CapacityResult
from engine.sim import Scratch
from generator import resolve
from generator.breaking import BreakPoints, LoadSettings, load_sweep_many
from generator.records import Curves, ResultRow, config_id, permalink
from generator.report_text import verdict

ENGINE_DIR = Path(engine.__file__).resolve().parent
CODE_FILES = (
    *sorted(ENGINE_DIR.glob("*.py")),
    *(
        Path(__file__).resolve().parent / name
        for name in ("sweep.py", "sweep_eval.py", "breaking.py")
    ),
)


@dataclass(frozen=True, slots=True)
class Combo:
    """One config to sweep, by catalog ids."""

    device: str
    model: str
    quant: str
    runtime: str
    context: int
    kv_dtype: str

    @property
    def id(self) -> str:
        """Stable config id."""
        return config_id(self.device, self.model, self.quant, self.context, self.kv_dtype)


def enumerate_combos(cat: Catalog) -> list[Combo]:
    """Every device x model x swept quant x context the runtimes allow, sorted by id.

    The runtime is the quant's most preferred one that serves the device's memory
    kind; a context above the model's maximum is skipped.
    """
    kv = cat.settings.default_kv_dtype
    combos = []
    for device_id in cat.devices():
        kind = resolve.device_for(cat, device_id).memory_kind
        for quant_id in cat.settings.sweep_quants:
            quant = cat.quants[quant_id]
            runtime = resolve.default_runtime(cat, quant, kind)
            if kind not in cat.runtimes[runtime].memory_kinds:
                continue
            if runtime not in cat.kv_dtypes[kv].runtimes:
                continue
            for model_id, arch in cat.archs.items():
                combos.extend(
                    Combo(device_id, model_id, quant_id, runtime, ctx, kv)
                    for ctx in cat.settings.contexts
                    if ctx <= arch.max_context
                )
    return sorted(combos, key=lambda c: c.id)


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _code_digest() -> str:
    h = hashlib.sha256()
    for path in CODE_FILES:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


class InputKeys:
    """Content hashes of everything a combo's row depends on."""

    def __init__(self, cat: Catalog) -> None:
        def dump(table: dict[str, Any]) -> dict[str, str]:
            return {k: _digest(v.model_dump(mode="json")) for k, v in table.items()}

        self.gpus = dump(cat.gpus)
        self.rigs = {
            k: _digest([v.model_dump(mode="json"), self.gpus[v.gpu]]) for k, v in cat.rigs.items()
        }
        self.models = dump(cat.models)
        self.quants = dump(cat.quants)
        self.runtimes = dump(cat.runtimes)
        self.kv_dtypes = dump(cat.kv_dtypes)
        self.shared = _digest(
            {
                "calibration": {k: v.model_dump(mode="json") for k, v in cat.calibration.items()},
                "settings": cat.settings.model_dump(mode="json"),
                "engine_version": engine.ENGINE_VERSION,
            }
        )
        self.code = _code_digest()

    def fingerprint_key(self, c: Combo) -> str:
        """Hash of the inputs and engine version (not the code): what a verifier recomputes."""
        device = self.rigs.get(c.device) or self.gpus[c.device]
        parts = [
            device,
            self.models[c.model],
            self.quants[c.quant],
            self.runtimes[c.runtime],
            self.kv_dtypes[c.kv_dtype],
            self.shared,
            c.id,
        ]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    def cache_key(self, c: Combo) -> str:
        """Fingerprint key plus the code: any change to the math recomputes."""
        return hashlib.sha256(f"{self.fingerprint_key(c)}|{self.code}".encode()).hexdigest()


def fingerprint(inputs_key: str, row: ResultRow) -> str:
    """Hash of inputs, engine version and every published output of a row."""
    fields = {k: v for k, v in _row_dict(row).items() if k != "fingerprint"}
    return _digest({"inputs": inputs_key, "version": engine.ENGINE_VERSION, "outputs": fields})


def _row_dict(row: ResultRow) -> dict[str, Any]:
    return {f: getattr(row, f) for f in row.__dataclass_fields__}


def evaluate(cat: Catalog, combo: Combo, inputs_key: str) -> tuple[ResultRow, Curves]:
    """Cost one combo and find its breaking points."""
    return evaluate_many(cat, [(combo, inputs_key)])[0]


def evaluate_many(
    cat: Catalog, todo: Sequence[tuple[Combo, str]], scratch: Scratch | None = None
) -> list[tuple[ResultRow, Curves]]:
    """Cost combos and find their breaking points, load-sweeping them in shared batches.

    Entry ``i`` equals ``evaluate(cat, *todo[i])``; ``scratch`` (reused memory for
    the simulation) changes no result.
    """
    caps = [_capacity(cat, combo) for combo, _ in todo]
    settings = LoadSettings.from_catalog(cat)
    swept = load_sweep_many(caps, settings, [c.id for c, _ in todo], scratch)
    return [
        (_row(cat, combo, key, cap, points), curves)
        for (combo, key), cap, (points, curves) in zip(todo, caps, swept, strict=True)
    ]


def _capacity(cat: Catalog, combo: Combo) -> CapacityResult:
    return resolve.estimate(
        resolve.device_for(cat, combo.device),
        resolve.runtime_profile(cat.runtimes[combo.runtime]),
        resolve.weight_format(cat.quants[combo.quant]),
        resolve.constants(cat),
        combo.context,
        resolve.kv_bytes(cat.kv_dtypes[combo.kv_dtype]),
        arch=cat.archs[combo.model],
    )


def _row(
    cat: Catalog, combo: Combo, inputs_key: str, cap: CapacityResult, points: BreakPoints
) -> ResultRow:
    dev = resolve.device_for(cat, combo.device)
    shortfall = 0 if cap.fits else cap.kv_bytes_per_request - cap.kv_budget_bytes
    row = ResultRow(
        config_id=combo.id,
        permalink=permalink(combo.device, combo.model, combo.quant, combo.context, combo.kv_dtype),
        gpu=combo.device,
        gpu_count=dev.count,
        model=combo.model,
        quant=combo.quant,
        runtime=combo.runtime,
        kv_dtype=combo.kv_dtype,
        context=combo.context,
        fits=cap.fits,
        slots=cap.slots,
        shortfall_bytes=shortfall,
        memory_bytes=cap.memory_bytes,
        usable_memory_bytes=cap.usable_memory_bytes,
        weights_bytes=cap.weights_bytes,
        overhead_bytes=cap.overhead_bytes,
        kv_budget_bytes=cap.kv_budget_bytes,
        kv_bytes_per_token=cap.kv_bytes_per_token,
        kv_bytes_per_request=cap.kv_bytes_per_request,
        kv_capacity_tokens=cap.kv_capacity_tokens,
        kv_basis=cap.kv_basis,
        total_params=cap.total_params,
        active_params=cap.active_params,
        decode_tokens_per_s=cap.decode_tokens_per_s,
        prefill_tokens_per_s=cap.prefill_tokens_per_s,
        bandwidth_concurrency=cap.bandwidth_concurrency,
        binding_ceiling=cap.binding_ceiling,
        effective_concurrency=cap.effective_concurrency,
        error_band_pct=cap.error_band_pct,
        error_band_reason=cap.error_band_reason,
        verdict=verdict(cap),
        fingerprint="",
        **points.as_fields(cap.error_band_pct),
    )
    return _with_fingerprint(row, inputs_key)


def _with_fingerprint(row: ResultRow, inputs_key: str) -> ResultRow:
    data = _row_dict(row)
    data["fingerprint"] = fingerprint(inputs_key, row)
    return ResultRow(**data)
