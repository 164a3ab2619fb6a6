"""The batch sweep: every combination the catalog allows, into one results table.

Two phases (compute, then write): enumerate combinations, reuse every row whose
inputs are unchanged since the last sweep in the same output directory, cost and
load-sweep the rest (optionally in several processes), then write
``results.csv``, ``curves.jsonl`` and ``inputs.json`` canonically.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import engine
from catalog.loader import Catalog, load_catalog
from engine.results import CapacityResult
from engine.sim import Scratch
from engine.sim_kernel import warm_up
from generator import resolve
from generator.breaking import BreakPoints, LoadSettings, load_sweep_many
from generator.records import Curves, ResultRow, config_id, permalink
from generator.report_text import verdict
from generator.results_io import CURVES, FIELDS, RESULTS, results_csv

INPUTS = "inputs.json"
ENGINE_DIR = Path(engine.__file__).resolve().parent
CODE_FILES = (
    *sorted(ENGINE_DIR.glob("*.py")),
    Path(__file__).resolve(),
    Path(__file__).resolve().parent / "breaking.py",
)

Progress = Callable[[int, int], None]
PARALLEL_MIN = 256  # fewer configs than this are not worth starting worker processes for
# Combos per task: several shared tick loops' worth of fitting configs (a loop
# takes engine.sim.MAX_LANES lanes), and ~60 tasks over the catalog for progress.
BATCH = 512


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


_WORKER_CAT: Catalog | None = None
_WORKER_SCRATCH = Scratch()  # the simulation's record memory, reused batch after batch


@dataclass(frozen=True, slots=True)
class Swept:
    """One computed config as it will be written: its results line and curves line."""

    config_id: str
    fits: bool
    row_line: str
    curves_line: str


_HEADER = results_csv([])
_CURVE_FIELDS = tuple(f.name for f in dataclasses.fields(Curves))
_CURVES_HEAD = '{"config_id":"'  # every canonical curves line starts so (sorted keys)


def curves_line(c: Curves) -> str:
    """A config's canonical ``curves.jsonl`` line, as :func:`curves_jsonl` writes it.

    Built from a shallow dict of the fields: the same JSON as from
    ``dataclasses.asdict``, which copies every number one call at a time and
    took half a minute over the catalog.
    """
    fields = {name: getattr(c, name) for name in _CURVE_FIELDS}
    return json.dumps(fields, sort_keys=True, separators=(",", ":")) + "\n"


def _swept(row: ResultRow, curves: Curves) -> Swept:
    return Swept(row.config_id, row.fits, results_csv([row])[len(_HEADER) :], curves_line(curves))


def _init_worker(catalog_dir: str | None) -> None:
    global _WORKER_CAT  # one catalog per worker process, loaded once
    _WORKER_CAT = load_catalog(Path(catalog_dir) if catalog_dir else None)


def _work(batch: list[tuple[Combo, str]]) -> list[Swept]:
    assert _WORKER_CAT is not None
    return [_swept(*r) for r in evaluate_many(_WORKER_CAT, batch, _WORKER_SCRATCH)]


def _chunks(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def compute(
    cat: Catalog,
    todo: list[tuple[Combo, str]],
    jobs: int,
    progress: Progress | None,
    catalog_dir: Path | None,
) -> list[Swept]:
    """Evaluate combos, in ``jobs`` processes when there is enough work to share."""
    out: list[Swept] = []
    batches = list(_chunks(todo, BATCH))
    if jobs <= 1 or len(todo) < PARALLEL_MIN:
        scratch = Scratch()
        for batch in batches:
            out.extend(_swept(*r) for r in evaluate_many(cat, batch, scratch))
            if progress:
                progress(len(out), len(todo))
        return out
    warm_up()  # compile once here; forked workers inherit the machine code
    with ProcessPoolExecutor(
        jobs, initializer=_init_worker, initargs=(str(catalog_dir) if catalog_dir else None,)
    ) as pool:
        for result in pool.map(_work, batches):
            out.extend(result)
            if progress:
                progress(len(out), len(todo))
    return out


@dataclass(frozen=True, slots=True)
class _Previous:
    """The last sweep in an output directory, unparsed: lines are reused as they are."""

    keys: dict[str, str]
    rows: dict[str, list[str]]  # config id -> CSV cells
    curves: dict[str, str]  # config id -> curves line


def _previous(out_dir: Path) -> _Previous:
    empty = _Previous({}, {}, {})
    try:
        keys = json.loads((out_dir / INPUTS).read_text(encoding="utf-8"))
        with (out_dir / RESULTS).open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            if next(reader) != FIELDS:
                return empty  # another table layout: compute everything
            rows = {cells[0]: cells for cells in reader}
        curves = {}
        with (out_dir / CURVES).open(encoding="utf-8") as fh:
            for line in fh:
                if not line.startswith(_CURVES_HEAD):
                    return empty
                curves[line[len(_CURVES_HEAD) : line.index('"', len(_CURVES_HEAD))]] = line
    except (OSError, ValueError, TypeError, StopIteration):
        return empty  # no usable previous sweep: compute everything
    return _Previous(keys, rows, curves)


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


def _csv_line(cells: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue()


def run_sweep(
    catalog_dir: Path | None,
    out_dir: Path,
    jobs: int = 1,
    progress: Progress | None = None,
) -> SweepStats:
    """Sweep the catalog into ``out_dir``, recomputing only what changed.

    The files are what :func:`results_csv` and :func:`curves_jsonl` would write
    for every row; rows whose inputs are unchanged keep their previous lines.
    """
    cat = load_catalog(catalog_dir)
    keys = InputKeys(cat)
    combos = enumerate_combos(cat)
    old = _previous(out_dir)
    fits = FIELDS.index("fits")
    rows: dict[str, str] = {}
    curves: dict[str, str] = {}
    fitting = 0
    new_keys: dict[str, str] = {}
    todo: list[tuple[Combo, str]] = []
    for c in combos:
        cid, ck = c.id, keys.cache_key(c)
        new_keys[cid] = ck
        if old.keys.get(cid) == ck and cid in old.rows and cid in old.curves:
            rows[cid], curves[cid] = _csv_line(old.rows[cid]), old.curves[cid]
            fitting += old.rows[cid][fits] == "true"
        else:
            todo.append((c, keys.fingerprint_key(c)))
    for done in compute(cat, todo, max(1, jobs), progress, catalog_dir):
        rows[done.config_id], curves[done.config_id] = done.row_line, done.curves_line
        fitting += done.fits
    out_dir.mkdir(parents=True, exist_ok=True)
    order = sorted(rows)
    _write_if_changed(out_dir / RESULTS, _HEADER + "".join(rows[cid] for cid in order))
    _write_if_changed(out_dir / CURVES, "".join(curves[cid] for cid in order))
    _write_if_changed(out_dir / INPUTS, json.dumps(new_keys, sort_keys=True, indent=0) + "\n")
    return SweepStats(len(combos), len(todo), len(combos) - len(todo), fitting)


def default_jobs() -> int:
    """One process per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
