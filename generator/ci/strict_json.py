"""JSON read as a verifier must read it: a key given twice, NaN or Infinity is an error.

Python's ``json`` keeps the last of two equal keys and reads ``NaN`` as a float,
so a tampered file could say two things at once, or a number that is none.
Numbers keep their JSON type: ``85`` is an int and ``85.0`` a float, and
comparing with :func:`same` tells them (and ``true`` from ``1``) apart.
"""

from __future__ import annotations

import json
from typing import Any


class StrictJsonError(ValueError):
    """Not JSON a published file could hold; the message says where."""


class DuplicateKey(StrictJsonError):
    """A key given twice: the file is readable, and has been tampered with."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"key {key!r} given twice")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise StrictJsonError(f"{name} is not a JSON number")


def loads_strict(data: str | bytes) -> Any:
    """Parse ``data``; StrictJsonError for duplicate keys, NaN/Infinity or malformed text."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except StrictJsonError:
        raise
    except UnicodeDecodeError as exc:
        raise StrictJsonError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except RecursionError:
        raise StrictJsonError("nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and ints too long to convert
        raise StrictJsonError(str(exc)) from exc


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values with the same types: ``1 != 1.0 != True``, recursively."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def dumps(value: Any) -> str:
    """Canonical JSON text of ``value`` (types kept: 85 and 85.0 print differently)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
