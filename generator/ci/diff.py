"""``backpressure diff OLD NEW``: which configs moved between two catalogs."""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from backpressure.generator import text
from backpressure.generator.records import ResultRow
from backpressure.generator.results_io import read_results
from backpressure.generator.sweep.run import Progress, run_sweep

# Numbers compared relatively; a move smaller than the tolerance is noise.
NUMERIC = (
    "slots",
    "max_concurrency",
    "saturation_rps",
    "breaking_rps",
    "shed_onset_rps",
    "p99_break_rps",
    "ttft_break_rps",
)
CATEGORICAL = ("fits", "usable", "fails_at_any_load", "breaking_rule", "binding_ceiling")


class DiffError(ValueError):
    """OLD or NEW names neither a catalog directory nor a git ref."""


@dataclass(frozen=True, slots=True)
class Move:
    """One config whose verdict or numbers moved."""

    config_id: str
    changes: tuple[tuple[str, str, str], ...]


@contextmanager
def catalog_at(spec: str, repo: Path) -> Iterator[Path]:
    """A catalog directory: ``spec`` itself, or ``catalog/`` at git ref ``spec``."""
    path = Path(spec)
    if path.is_dir():
        yield path
        return
    try:
        blob = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", spec, "catalog"],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise DiffError(f"{spec!r} is neither a directory nor a git ref with catalog/") from exc
    with tempfile.TemporaryDirectory(prefix="backpressure-diff-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp) / "catalog"


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return text.number(value)
    return str(value)


def _number_moved(a: float | None, b: float | None, tolerance: float) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(b - a) > tolerance * max(abs(a), 1e-12)


def _moved(old: ResultRow, new: ResultRow, tolerance: float) -> tuple[tuple[str, str, str], ...]:
    changes = []
    for name in CATEGORICAL:
        a, b = getattr(old, name), getattr(new, name)
        if a != b:
            changes.append((name, _fmt(a), _fmt(b)))
    for name in NUMERIC:
        a, b = getattr(old, name), getattr(new, name)
        if (a is None) != (b is None) or (
            a is not None and b is not None and abs(b - a) > tolerance * max(abs(a), 1e-12)
        ):
            changes.append((name, _fmt(a), _fmt(b)))
    return tuple(changes)


def compare(old: list[ResultRow], new: list[ResultRow], tolerance: float) -> list[Move]:
    """Configs added, removed, or moved beyond ``tolerance`` (relative)."""
    before = {r.config_id: r for r in old}
    after = {r.config_id: r for r in new}
    moves = []
    for cid in sorted(set(before) | set(after)):
        if cid not in before:
            moves.append(Move(cid, (("config", "-", "added"),)))
        elif cid not in after:
            moves.append(Move(cid, (("config", "removed", "-"),)))
        else:
            changes = _moved(before[cid], after[cid], tolerance)
            if changes:
                moves.append(Move(cid, changes))
    return moves


def markdown(moves: list[Move], tolerance: float, limit: int = 200) -> str:
    """A Markdown table fit for a pull-request comment."""
    if not moves:
        return f"No config moved beyond {tolerance:.0%}.\n"
    lines = [
        f"**{len(moves)} config(s) moved** (tolerance {tolerance:.0%}):",
        "",
        "| config | field | old | new |",
        "|---|---|---|---|",
    ]
    for move in moves[:limit]:
        for field, a, b in move.changes:
            lines.append(f"| `{move.config_id}` | {field} | {a} | {b} |")
    if len(moves) > limit:
        lines.append(f"\n…and {len(moves) - limit} more.")
    return "\n".join(lines) + "\n"


def run_diff(
    old: str,
    new: str,
    work: Path,
    repo: Path,
    jobs: int,
    tolerance: float,
    progress: Progress | None = None,
) -> list[Move]:
    """Sweep both catalogs (each into its own cache directory) and compare."""
    rows = []
    for label, spec in (("old", old), ("new", new)):
        with catalog_at(spec, repo) as cat_dir:
            out = work / label
            run_sweep(cat_dir, out, jobs, progress)
            rows.append(read_results(out))
    return compare(rows[0], rows[1], tolerance)
