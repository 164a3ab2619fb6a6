"""The batch sweep: every combination the catalog allows, into one results table.

Two phases (compute, then write): enumerate combinations, reuse every row whose
inputs are unchanged since the last sweep in the same output directory, cost and
load-sweep the rest (optionally in several processes), then write
``results.csv``, ``curves.jsonl`` and ``inputs.json`` canonically, as one unit
(generator/manifest.py: a previous sweep is reused only if all three match).
"""

from __future__ import annotations

import csv
import ctypes
import io
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.generator import manifest
from backpressure.generator.keys import InputKeys
from backpressure.generator.records import ResultRow
from backpressure.generator.results_io import (
    CURVES,
    CURVES_HEAD,
    FIELDS,
    RESULTS,
    csv_line,
    line_config_id,
    results_csv,
    results_line,
)
from backpressure.generator.sweep.combos import Combo, enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate_lines
from backpressure.generator.sweep.rig import Serving, warm_up

INPUTS = "inputs.json"
log = logging.getLogger("backpressure")
Progress = Callable[[int, int], None]
PARALLEL_MIN = 256  # fewer configs than this are not worth starting worker processes for
# Combos per task: several shared tick loops' worth of fitting configs (a loop
# takes engine.sim.run.MAX_LANES lanes), and ~60 tasks over the catalog for progress.
BATCH = 512


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WORKER_CAT: Catalog | None = None
# Simulations by content key, kept batch after batch: a vLLM config's server does
# not depend on its context, and combos arrive sorted, so its contexts meet here.
_WORKER_MEMO: dict[str, Serving] = {}


@dataclass(frozen=True, slots=True)
class Swept:
    """One computed config as it will be written: its results line and curves line."""

    config_id: str
    fits: bool
    row_line: str
    curves_line: str


_HEADER = results_csv([])


def _swept(row: ResultRow, curves: str) -> Swept:
    return Swept(row.config_id, row.fits, results_line(row), curves)


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this worker when the build that started it dies.

    A killed build would otherwise leave its workers waiting for work forever.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _init_worker(catalog_dir: str | None, parent: int) -> None:
    global _WORKER_CAT  # one catalog per worker process, loaded once
    _die_with_parent(parent)
    _WORKER_CAT = load_catalog(Path(catalog_dir) if catalog_dir else None)


def _work(batch: list[tuple[Combo, str]]) -> list[Swept]:
    assert _WORKER_CAT is not None
    return [_swept(*r) for r in evaluate_lines(_WORKER_CAT, batch, _WORKER_MEMO)]


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
        memo: dict[str, Serving] = {}
        for batch in batches:
            out.extend(_swept(*r) for r in evaluate_lines(cat, batch, memo))
            if progress:
                progress(len(out), len(todo))
        return out
    warm_up()  # compile once here; forked workers inherit the machine code
    _WORKER_MEMO.clear()
    with ProcessPoolExecutor(
        jobs,
        initializer=_init_worker,
        initargs=(str(catalog_dir) if catalog_dir else None, os.getpid()),
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
    rows: dict[str, str]  # config id -> its line of results.csv, as written
    curves: dict[str, str]  # config id -> curves line


_FITS = FIELDS.index("fits")


def _row_lines(text: str) -> dict[str, str] | None:
    """results.csv's rows as written, by config id; None if it is not as this version writes.

    A row is kept as its line, so a reused row costs no parsing and no writing
    again. That needs every record on one line: a line with an odd number of
    quotes would open a quoted field that runs on (the writer never makes one:
    no cell holds a line break), and then the file is parsed as CSV instead.
    """
    if not text.endswith("\n"):
        return None
    lines = [line + "\n" for line in text[:-1].split("\n")]  # the writer ends lines with \n
    if lines[0] != _HEADER or any(line.count('"') % 2 for line in lines):
        return None
    return {line.split(",", 1)[0]: line for line in lines[1:]}


def _fits(line: str) -> bool:
    # the cells before it are ids and integers: never quoted, never holding a comma
    return line.split(",", _FITS + 1)[_FITS] == "true"


def _previous(out_dir: Path) -> _Previous:
    empty = _Previous({}, {}, {})
    try:
        # The three files as one unit, each checked against the manifest written last.
        files = manifest.read(out_dir, (RESULTS, CURVES, INPUTS))
    except manifest.Damaged as exc:
        if any((out_dir / name).exists() for name in (RESULTS, CURVES, INPUTS)):
            log.warning("%s; recomputing every config", exc)
        return empty
    try:
        keys = json.loads(files[INPUTS].decode("utf-8"))
        text = files[RESULTS].decode("utf-8")
        rows = _row_lines(text)
        if rows is None:
            reader = csv.reader(io.StringIO(text, newline=""))
            if next(reader) != FIELDS:
                return empty  # another table layout: compute everything
            rows = {cells[0]: csv_line(cells) for cells in reader}
        curves = {}
        for line in files[CURVES].decode("utf-8").splitlines(keepends=True):
            if not line.startswith(CURVES_HEAD):
                return empty  # not as this version writes: compute everything
            curves[line_config_id(line)] = line
    except (ValueError, TypeError, StopIteration, IndexError):
        return empty  # no usable previous sweep: compute everything
    if not isinstance(keys, dict):
        return empty
    return _Previous(keys, rows, curves)


@dataclass(frozen=True, slots=True)
class SweepStats:
    """What a sweep did."""

    total: int
    computed: int
    reused: int
    fitting: int


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
    rows: dict[str, str] = {}
    curves: dict[str, str] = {}
    fitting = 0
    new_keys: dict[str, str] = {}
    todo: list[tuple[Combo, str]] = []
    for c in combos:
        cid, ck = c.id, keys.cache_key(c)
        new_keys[cid] = ck
        if old.keys.get(cid) == ck and cid in old.rows and cid in old.curves:
            rows[cid], curves[cid] = old.rows[cid], old.curves[cid]
            fitting += _fits(old.rows[cid])
        else:
            todo.append((c, keys.fingerprint_key(c)))
    for done in compute(cat, todo, max(1, jobs), progress, catalog_dir):
        rows[done.config_id], curves[done.config_id] = done.row_line, done.curves_line
        fitting += done.fits
    if not todo and new_keys == old.keys and len(old.rows) == len(rows) == len(old.curves):
        # Every config reused and none gone: the files (checked on reading) stay as they are.
        return SweepStats(len(combos), 0, len(combos), fitting)
    order = sorted(rows)
    manifest.commit(
        out_dir,
        {
            RESULTS: _HEADER + "".join(rows[cid] for cid in order),
            CURVES: "".join(curves[cid] for cid in order),
            INPUTS: json.dumps(new_keys, sort_keys=True, indent=0) + "\n",
        },
    )
    return SweepStats(len(combos), len(todo), len(combos) - len(todo), fitting)


def default_jobs() -> int:
    """One process per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
