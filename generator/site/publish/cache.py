"""The render cache beside the site (``<out>.cache``): every published file, stored once.

- ``files/``: every file the site publishes, named by the SHA-256 of its bytes,
  written under a temporary name and renamed into place, never changed
  afterwards, and read-only. The site hard-links them, so a file whose bytes
  did not change keeps its inode from build to build (read-only, because an
  in-place edit of a published file would otherwise edit the cache too; tools
  that write a new file and rename it, like ``sed -i``, are harmless).
- ``index.json``: for each config's content key (generator/site_keys.py), the
  hashes of its page, badge and JSON, and the links in the page's body (so an
  unchanged page is not read again to check them).
- ``docs/``: small JSON documents by key: a scenario page's context, the files
  one Pagefind run produced.

Every entry is valid whatever state the published site is in: a key
determines its bytes. An interrupted build leaves at most files nobody uses,
which the next successful build prunes.

Nothing is trusted by its name. A stored file is reused only after its bytes
were hashed (once per build) and match its name; the index and every document
carry the SHA-256 of their text on their first line. A file that does not
match (truncated, edited, a flipped bit) is moved to the trash and its
content made again; the build says how many on stderr (a warning on the
``backpressure`` logger).
"""

# The hot paths take plain string paths and os calls: a build touches some 90,000
# files, and building a pathlib object for each costs more than the syscall.
# ruff: noqa: PTH103, PTH104, PTH105, PTH108, PTH112, PTH114, PTH116

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from backpressure.generator.site.publish.assemble import SiteError

# Bump when the layout changes: an older cache is then discarded whole.
FORMAT = "backpressure render cache 4\n"
# What a cache directory holds; one holding anything else is not ours to discard.
_LAYOUT = frozenset({"FORMAT", "index.json", "index.json.tmp", "files", "docs", "scratch", "trash"})
log = logging.getLogger("backpressure")
CONFIG_PARTS = ("html", "svg", "json")
_INDEX = "index.json"
_REMOVER = "import shutil, sys\nfor p in sys.argv[1:]:\n    shutil.rmtree(p, ignore_errors=True)"
_LAUNCHER = (
    "import subprocess, sys\n"
    f"subprocess.Popen([sys.executable, '-c', {_REMOVER!r}, *sys.argv[1:]], start_new_session=True,"
    " stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
)


class RenderCache:
    """Stores by key; remembers which entries this build used, so the rest can be pruned.

    Paths are plain strings here: a build looks up some 90,000 of them, and
    pathlib objects would cost more than the lookups.
    """

    def __init__(self, root: Path, reuse: bool = True) -> None:
        self.root = root
        self.reuse = reuse
        self.used: set[str] = set()
        self._root = str(root)
        self._inodes: dict[str, dict[str, int]] = {}
        self._index: dict[str, dict[str, Any]] | None = None
        self._fresh: dict[str, dict[str, Any]] = {}
        self._verified: set[str] = set()
        self.damaged: list[str] = []
        self._open(root)
        # Scratch space on the cache's filesystem, so its files can be linked in.
        # One build at a time per output directory (they would share <out>.tmp too).
        self.scratch = root / "scratch"
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.trash = f"{self._root}/trash"
        self._discarded = 0
        self._shelve_trash()  # a failed build's, emptied with this one's

    def _open(self, root: Path) -> None:
        """Use ``root`` if it is absent, empty or a cache of this layout; wipe an older one."""
        marker = root / "FORMAT"
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            raise SiteError(f"{root} exists but is not a render cache; move it away")
        if root.exists() and marker.is_file():
            if _read_small(marker) == FORMAT.encode():
                pass
            elif _looks_like_cache(root):  # ours, in an older layout or with a damaged marker
                log.warning("%s: an older or damaged render cache; starting it afresh", root)
                shutil.rmtree(root)
            else:
                raise SiteError(f"{root} exists but is not a render cache; move it away")
        elif root.exists() and any(root.iterdir()):
            raise SiteError(f"{root} exists but is not a render cache; move it away")
        root.mkdir(parents=True, exist_ok=True)
        if not marker.is_file():
            marker.write_text(FORMAT, encoding="utf-8")

    # -- config pages ----------------------------------------------------------

    def config(self, key: str) -> tuple[dict[str, str], list[str]] | None:
        """A config's files by part (html, svg, json) and its body links, if all are stored."""
        entry = self._entries().get(key) if self.reuse else None
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(p), str) for p in CONFIG_PARTS
        ):
            return None
        paths = {part: self._path(entry[part]) for part in CONFIG_PARTS}
        if not all(self.inode(p) for p in paths.values()) or not isinstance(
            entry.get("links"), list
        ):
            return None
        if not all(self._intact(path) for path in paths.values()):
            return None
        self._fresh[key] = entry
        return paths, entry["links"]

    def put_config(self, key: str, parts: dict[str, bytes], links: list[str]) -> dict[str, str]:
        """Store a config's files (page, badge, JSON) and record them, with its links, by key."""
        paths = {part: self.blob(parts[part]) for part in CONFIG_PARTS}
        self._fresh[key] = {
            **{part: p.rpartition("/")[2] for part, p in paths.items()},
            "links": links,
        }
        return paths

    def save_index(self, everything: bool = False) -> None:
        """Record the configs this build used (``everything``: and all recorded before)."""
        index = {**self._entries(), **self._fresh} if everything else self._fresh
        text = json.dumps(index, sort_keys=True, separators=(",", ":"))
        tmp = self.root / f"{_INDEX}.tmp"
        tmp.write_bytes(_sealed(text.encode("utf-8")))
        tmp.replace(self.root / _INDEX)

    def _entries(self) -> dict[str, dict[str, Any]]:
        if self._index is None:
            path = self.root / _INDEX
            index = self._unseal(str(path)) if path.exists() else {}
            self._index = index if isinstance(index, dict) else {}
        return self._index

    # -- files by content ------------------------------------------------------

    def blob(self, data: bytes) -> str:
        """The stored file holding ``data``."""
        path = self._path(hashlib.sha256(data).hexdigest())
        if self.inode(path) and (path in self._verified or self._holds(path, data)):
            return path
        self._verified.add(path)
        return self._store(path, data)

    def blob_from(self, src: Path) -> str:
        """The stored file with the bytes of ``src`` (hard-linked from it when new)."""
        data = src.read_bytes()
        path = self._path(hashlib.sha256(data).hexdigest())
        if self.inode(path) and (path in self._verified or self._holds(path, data)):
            return path
        src.chmod(0o444)
        self._verified.add(path)
        return self._commit(str(src), path, link=True)

    def stored(self, sha: str) -> str | None:
        """The stored file of this content hash, if it is there and its bytes match."""
        path = self._path(sha)
        return path if self.inode(path) and self._intact(path) else None

    # -- checks ---------------------------------------------------------------

    def _holds(self, path: str, data: bytes) -> bool:
        """Whether the stored file at ``path`` has exactly ``data``; a damaged one is discarded."""
        if _read_small(path, len(data) + 1) == data:
            self._verified.add(path)
            return True
        self._damaged(path, "bytes do not match their hash")
        return False

    def _intact(self, path: str) -> bool:
        """Whether the stored file's bytes hash to its name; a damaged one is discarded."""
        if path in self._verified:
            return True
        h = hashlib.sha256()
        try:
            with open(path, "rb") as fh:  # noqa: PTH123 - a plain path string on the hot path
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        except OSError:
            pass
        if h.hexdigest() == path.rpartition("/")[2]:
            self._verified.add(path)
            return True
        self._damaged(path, "bytes do not match their hash")
        return False

    def _damaged(self, path: str, why: str) -> None:
        self.damaged.append(f"{path.removeprefix(self._root + '/')}: {why}")
        folder, _, name = path.rpartition("/")
        self._table(folder).pop(name, None)
        self._verified.discard(path)
        if os.path.lexists(path):
            self.discard(path)

    def _unseal(self, path: str) -> Any:
        """A sealed JSON document's content, or None (said, and discarded) if it is damaged."""
        raw = _read_small(path)
        head, _, body = raw.partition(b"\n")
        if head != hashlib.sha256(body).hexdigest().encode():
            self._damaged(path, "content does not match its hash")
            return None
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            self._damaged(path, "not JSON")
            return None

    def report_damage(self) -> None:
        """Say on stderr (the ``backpressure`` logger) what was found damaged and made again."""
        if self.damaged:
            log.warning(
                "%s: %d damaged file(s) found and made again, e.g. %s",
                self.root,
                len(self.damaged),
                "; ".join(self.damaged[:3]),
            )
            self.damaged.clear()

    # -- documents ------------------------------------------------------------

    def doc(self, kind: str, key: str) -> Any:
        """A stored JSON document, or None (also when it is damaged: then it is made again)."""
        path = self._doc_path(kind, key)
        if not self.reuse or not self.inode(path):
            return None
        return self._unseal(path)

    def put_doc(self, kind: str, key: str, obj: Any) -> None:
        """Store a JSON document (keys in insertion order: it must load as it was)."""
        path = self._doc_path(kind, key)
        self._store(path, _sealed(json.dumps(obj, ensure_ascii=False).encode("utf-8")))

    def _doc_path(self, kind: str, key: str) -> str:
        path = f"{self._root}/docs/{kind}-{key}.json"
        self.used.add(path)
        return path

    # -- bookkeeping ----------------------------------------------------------

    def inode(self, path: str) -> int:
        """The inode number of a stored file, 0 if it is absent (one directory scan per prefix)."""
        folder, _, name = path.rpartition("/")
        return self._table(folder).get(name, 0)

    def _table(self, folder: str) -> dict[str, int]:
        table = self._inodes.get(folder)
        if table is None:
            table = {}
            try:
                with os.scandir(folder) as it:
                    table = {e.name: e.inode() for e in it if e.is_file(follow_symlinks=False)}
            except OSError:
                pass
            self._inodes[folder] = table
        return table

    def prune(self) -> int:
        """Discard every stored file this build did not use, and the scratch space."""
        shutil.rmtree(self.scratch, ignore_errors=True)
        removed = 0
        for folder in [*_entries(f"{self._root}/files"), f"{self._root}/docs"]:
            for path in _entries(folder):
                if path not in self.used:
                    self.discard(path)
                    removed += 1
        return removed

    def discard(self, path: str) -> None:
        """Move a file or directory (on this filesystem) to the trash, emptied after the build."""
        if self._discarded == 0:
            os.makedirs(self.trash, exist_ok=True)
        try:
            os.rename(path, f"{self.trash}/{self._discarded}")
        except OSError:  # not on this filesystem, say: delete it now
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        self._discarded += 1

    def empty_trash(self) -> None:
        """Delete what was discarded, in a process of its own that the build does not wait for.

        On a disk that discards freed blocks (``mount -o discard``), freeing a
        written file costs milliseconds: three seconds for the thousand files a
        catalog edit makes obsolete, more than the rest of an incremental build.
        A remover that died (a build killed, a machine stopped) leaves its
        directory, and the next build's remover takes it too.
        """
        self._shelve_trash()
        leftovers = [p for p in _entries(self._root) if p.rpartition("/")[2].startswith("trash-")]
        if leftovers:
            # Started through a short-lived launcher that this build waits for, so the
            # remover is nobody's child here (no zombie, no "still running" warning).
            subprocess.run(
                [sys.executable, "-c", _LAUNCHER, *leftovers],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )

    def _shelve_trash(self) -> None:
        if os.path.isdir(self.trash):
            os.rename(self.trash, f"{self.trash}-{os.getpid()}-{time.time_ns()}")

    def _path(self, sha: str) -> str:
        path = f"{self._root}/files/{sha[:2]}/{sha}"
        self.used.add(path)
        return path

    def _store(self, path: str, data: bytes) -> str:
        tmp = self._temp(path)
        # Created read-only: the write goes through the descriptor opened here.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return self._commit(tmp, path, link=False)

    def _temp(self, path: str) -> str:
        folder, _, name = path.rpartition("/")
        os.makedirs(folder, exist_ok=True)
        tmp = f"{folder}/.{name}.{os.getpid()}"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        return tmp

    def _commit(self, src: str, path: str, link: bool) -> str:
        if link:
            tmp = self._temp(path)
            try:
                os.link(src, tmp)
            except OSError:
                shutil.copyfile(src, tmp)
            src = tmp
        folder, _, name = path.rpartition("/")
        table = self._table(folder)
        os.replace(src, path)
        table[name] = os.stat(path).st_ino
        return path


def _sealed(body: bytes) -> bytes:
    """A document with the SHA-256 of its body on the first line."""
    return hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _read_small(path: str | Path, limit: int = 1 << 30) -> bytes:
    """A file's bytes (at most ``limit``), or b"" if it cannot be read."""
    try:
        with open(path, "rb") as fh:  # noqa: PTH123 - plain path strings on the hot path
            return fh.read(limit)
    except OSError:
        return b""


def _looks_like_cache(root: Path) -> bool:
    """Whether every entry of ``root`` is one a render cache has."""
    return all(p.name in _LAYOUT or p.name.startswith("trash-") for p in root.iterdir())


def _entries(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as it:
            return sorted(e.path for e in it)
    except OSError:
        return []
