"""A published site read strictly: unreadable files are errors, odd types are differences.

What ``backpressure verify`` needs to read and compare published files; the
recomputation and the comparison of one config's files is generator/ci/recheck.py.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backpressure.generator.ci import strict_json
from backpressure.generator.records import ResultRow

_HINTS = typing.get_type_hints(ResultRow)


class VerifyError(ValueError):
    """A target that names no config, or a file that cannot be read (exit 2)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One published file that differs from the recomputed one, and how."""

    file: str
    what: str


def read_bytes(path: Path) -> bytes:
    """A published file's bytes; VerifyError (exit 2) if it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise VerifyError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def read_json(path: Path) -> Any:
    """A published JSON file, strictly; VerifyError if it is not JSON at all.

    A key given twice is not unreadable but tampered: :class:`DuplicateKey` passes through.
    """
    try:
        return strict_json.loads_strict(read_bytes(path))
    except strict_json.DuplicateKey:
        raise
    except strict_json.StrictJsonError as exc:
        raise VerifyError(f"{path}: not a readable JSON file: {exc}") from exc


def row_from_json(data: Any) -> ResultRow | None:
    """A published config JSON as a row, if every field is there with its type; else None."""
    if not isinstance(data, dict) or set(data) != set(_HINTS):
        return None
    for name, value in data.items():
        allowed = typing.get_args(_HINTS[name]) or (_HINTS[name],)
        if not any(type(value) is t for t in allowed):  # 1 is not 1.0, True is not 1
            return None
    return ResultRow(**data)


def compare_fields(published: Any, fresh: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Fields whose published value (or type) differs from the recomputed one."""
    if not isinstance(published, dict):
        return [("(the file)", "not an object", "an object")]
    out = []
    for key in sorted(set(fresh) | set(published)):
        pub, new = published.get(key, "<missing>"), fresh.get(key, "<missing>")
        if not strict_json.same(pub, new):
            out.append((key, pub, new))
    return out


def short_diff(published: str, expected: str, width: int = 36) -> str:
    """Where two texts first differ, with a little context of each."""
    i = next(
        (k for k, (a, b) in enumerate(zip(published, expected, strict=False)) if a != b),
        min(len(published), len(expected)),
    )
    start = max(0, i - width // 2)
    return (
        f"first difference at character {i:,}: published {published[start : i + width]!r}, "
        f"recomputed {expected[start : i + width]!r}"
    )


def show_value(value: Any) -> str:
    """A JSON value, cut to 30 characters, for a one-line report."""
    text = strict_json.dumps(value)
    return text if len(text) <= 30 else text[:27] + "..."
