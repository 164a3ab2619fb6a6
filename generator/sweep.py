"""The batch sweep: every combination the catalog allows, into one results table.

Two phases (compute, then write): enumerate combinations, reuse every row whose
inputs are unchanged since the last sweep in the same output directory, cost and
load-sweep the rest (optionally in several processes), then write
``results.csv``, ``curves.jsonl`` and ``inputs.json`` canonically.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import engine
from catalog.loader import Catalog, load_catalog
from generator import resolve
from generator.breaking import LoadSettings, load_sweep
from generator.records import Curves, ResultRow, config_id, permalink
from generator.report_text import verdict
from generator.results_io import (
    CURVES,
    RESULTS,
    curves_jsonl,
    read_curves,
    read_results,
    results_csv,
)

INPUTS = "inputs.json"
ENGINE_DIR = Path(engine.__file__).resolve().parent
CODE_FILES = (
    *sorted(ENGINE_DIR.glob("*.py")),
    Path(__file__).resolve(),
    Path(__file__).resolve().parent / "breaking.py",
)

Progress = Callable[[int, int], None]
PARALLEL_MIN = 256  # fewer configs than this are not worth starting worker processes for


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
    dev = resolve.device_for(cat, combo.device)
    cap = resolve.estimate(
        dev,
        resolve.runtime_profile(cat.runtimes[combo.runtime]),
        resolve.weight_format(cat.quants[combo.quant]),
        resolve.constants(cat),
        combo.context,
        resolve.kv_bytes(cat.kv_dtypes[combo.kv_dtype]),
        arch=cat.archs[combo.model],
    )
    points, curves = load_sweep(cap, LoadSettings.from_catalog(cat), combo.id)
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
    row = _with_fingerprint(row, inputs_key)
    return row, curves


def _with_fingerprint(row: ResultRow, inputs_key: str) -> ResultRow:
    data = _row_dict(row)
    data["fingerprint"] = fingerprint(inputs_key, row)
    return ResultRow(**data)


_WORKER_CAT: Catalog | None = None


def _init_worker(catalog_dir: str | None) -> None:
    global _WORKER_CAT  # one catalog per worker process, loaded once
    _WORKER_CAT = load_catalog(Path(catalog_dir) if catalog_dir else None)


def _work(batch: list[tuple[Combo, str]]) -> list[tuple[ResultRow, Curves]]:
    assert _WORKER_CAT is not None
    return [evaluate(_WORKER_CAT, c, key) for c, key in batch]


def _chunks(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def compute(
    cat: Catalog,
    todo: list[tuple[Combo, str]],
    jobs: int,
    progress: Progress | None,
    catalog_dir: Path | None,
) -> list[tuple[ResultRow, Curves]]:
    """Evaluate combos, in ``jobs`` processes when there is enough work to share."""
    out: list[tuple[ResultRow, Curves]] = []
    batches = list(_chunks(todo, 64))
    if jobs <= 1 or len(todo) < PARALLEL_MIN:
        for batch in batches:
            out.extend(evaluate(cat, c, key) for c, key in batch)
            if progress:
                progress(len(out), len(todo))
        return out
    with ProcessPoolExecutor(
        jobs, initializer=_init_worker, initargs=(str(catalog_dir) if catalog_dir else None,)
    ) as pool:
        for result in pool.map(_work, batches):
            out.extend(result)
            if progress:
                progress(len(out), len(todo))
    return out


def _previous(out_dir: Path) -> tuple[dict[str, str], dict[str, ResultRow], dict[str, Curves]]:
    try:
        keys = json.loads((out_dir / INPUTS).read_text(encoding="utf-8"))
        rows = {r.config_id: r for r in read_results(out_dir)}
        curves = read_curves(out_dir)
    except (OSError, ValueError, TypeError, KeyError):
        return {}, {}, {}  # no usable previous sweep: compute everything
    return keys, rows, curves


@dataclass(frozen=True, slots=True)
class SweepStats:
    """What a sweep did."""

    total: int
    computed: int
    reused: int
    fitting: int


def _write_if_changed(path: Path, text: str) -> None:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def run_sweep(
    catalog_dir: Path | None,
    out_dir: Path,
    jobs: int = 1,
    progress: Progress | None = None,
) -> SweepStats:
    """Sweep the catalog into ``out_dir``, recomputing only what changed."""
    cat = load_catalog(catalog_dir)
    keys = InputKeys(cat)
    combos = enumerate_combos(cat)
    old_keys, old_rows, old_curves = _previous(out_dir)
    rows: dict[str, ResultRow] = {}
    curves: dict[str, Curves] = {}
    new_keys: dict[str, str] = {}
    todo: list[tuple[Combo, str]] = []
    for c in combos:
        cid, ck = c.id, keys.cache_key(c)
        new_keys[cid] = ck
        if old_keys.get(cid) == ck and cid in old_rows and cid in old_curves:
            rows[cid], curves[cid] = old_rows[cid], old_curves[cid]
        else:
            todo.append((c, keys.fingerprint_key(c)))
    for row, curve in compute(cat, todo, max(1, jobs), progress, catalog_dir):
        rows[row.config_id], curves[row.config_id] = row, curve
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_if_changed(out_dir / RESULTS, results_csv(rows.values()))
    _write_if_changed(out_dir / CURVES, curves_jsonl(curves.values()))
    _write_if_changed(out_dir / INPUTS, json.dumps(new_keys, sort_keys=True, indent=0) + "\n")
    return SweepStats(
        len(combos), len(todo), len(combos) - len(todo), sum(r.fits for r in rows.values())
    )


def default_jobs() -> int:
    """One process per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
