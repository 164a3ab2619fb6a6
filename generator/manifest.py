"""A sweep's files committed as one unit: a manifest of their hashes, written last.

``results.csv``, ``curves.jsonl`` and ``inputs.json`` are each written to a
temporary name and renamed into place, but three renames are not one: a build
killed between them would leave one catalog's rows beside another's inputs,
and the next sweep would take them for current. So the manifest (SHA-256 of
each file) is removed before the first rename and written after the last; a
reader hashes every file against it. No manifest, a manifest that does not
parse, or a file that does not match: the set is damaged, and the sweep
recomputes everything, or the site build refuses to publish from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

MANIFEST = "manifest.json"
FORMAT = "backpressure sweep manifest 1"
MARKER = ".backpressure-sweep"
MARKER_TEXT = "This directory holds a backpressure sweep (results.csv, curves.jsonl).\n"


class Damaged(ValueError):
    """The files in a directory are not a complete, unchanged set; the message says why."""


def commit(folder: Path, files: Mapping[str, str]) -> None:
    """Write ``files`` (name -> text) into ``folder`` as one unit, then the manifest.

    A file whose bytes are already there is not rewritten (it keeps its inode).
    """
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    if not marker.is_file():
        marker.write_text(MARKER_TEXT, encoding="utf-8")
    data = {name: text.encode("utf-8") for name, text in files.items()}
    (folder / MANIFEST).unlink(missing_ok=True)  # from here on the set is incomplete
    for name in sorted(data):
        path = folder / name
        if _read(path) == data[name]:
            continue
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data[name])
        tmp.replace(path)
    hashes = {name: hashlib.sha256(raw).hexdigest() for name, raw in sorted(data.items())}
    text = json.dumps({"format": FORMAT, "files": hashes}, indent=1, sort_keys=True) + "\n"
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(folder / MANIFEST)


def read(folder: Path, names: Iterable[str]) -> dict[str, bytes]:
    """The bytes of ``names`` in ``folder``, each checked against the manifest; else Damaged."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Damaged(f"{folder}: no {MANIFEST} (an interrupted or older sweep)") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Damaged(f"{folder}/{MANIFEST} cannot be read: {exc}") from None
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict) or manifest.get("format") != FORMAT:
        raise Damaged(f"{folder}/{MANIFEST} is not a sweep manifest")
    out = {}
    for name in names:
        raw = _read(folder / name)
        if raw is None:
            raise Damaged(f"{folder}/{name} is missing")
        if listed.get(name) != hashlib.sha256(raw).hexdigest():
            raise Damaged(f"{folder}/{name} does not match its manifest (changed or damaged)")
        out[name] = raw
    return out


def invalidate(folder: Path) -> None:
    """Make the next reader recompute everything (``build --full``)."""
    (folder / MANIFEST).unlink(missing_ok=True)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
