"""The next site, assembled in place in the tree of an earlier build, then swapped in.

Making a fresh tree of 30,000 directories and 90,000 files, and deleting the
old one, costs more than re-rendering the pages one catalog edit touches. So
the tree published two builds ago (kept as ``<out>.old``) becomes the
workspace ``<out>.tmp``: every file is a hard link to the render cache, a
file whose inode is already the wanted cache file is left alone, the rest are
relinked, files no longer wanted are removed (to the cache's trash: see
``RenderCache.empty_trash``). Then the swap: ``<out>`` becomes
``<out>.old``, ``<out>.tmp`` becomes ``<out>``. The published tree is never
written to; a failed build shelves its workspace as ``<out>.old`` and leaves
``<out>`` as it was.
"""

# The hot paths take plain string paths and os calls: a build touches some 90,000
# files, and building a pathlib object for each costs more than the syscall.
# ruff: noqa: PTH103, PTH106

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backpressure.generator.site.publish.assemble import SITE_MARKER, link_or_copy, safe_rel
from backpressure.generator.site.publish.cache import RenderCache
from backpressure.generator.site.publish.guard import SITE_MARKER_TEXT, exchange, sibling


def inodes(root: Path) -> tuple[dict[str, int], set[str]]:
    """Every file under ``root`` with its inode number, and every directory.

    One directory scan each, no stat per file: the inode comes with the entry.
    A symlink counts as a file (never followed), so a tree sweep removes it.
    """
    files: dict[str, int] = {}
    dirs: set[str] = set()
    todo = [("", str(root))] if root.is_dir() else []
    while todo:
        rel, path = todo.pop()
        with os.scandir(path) as it:
            for e in it:
                name = f"{rel}{e.name}"
                if e.is_dir(follow_symlinks=False):
                    dirs.add(name)
                    todo.append((name + "/", e.path))
                else:
                    files[name] = e.inode()
    return files, dirs


class Tree:
    """A site tree being brought to a wanted state by hard-linking cache files into it."""

    def __init__(self, root: Path, cache: RenderCache) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.cache = cache
        self._root = str(root)
        self.have, self.dirs = inodes(root)
        self.wanted: dict[str, str] = {}
        self.linked = 0

    def place(self, rel: str, src: str) -> None:
        """Make ``rel`` the cache file ``src``, unless it already is."""
        safe_rel(rel)
        self.wanted[rel] = src
        ino = self.cache.inode(src)
        if ino and self.have.get(rel) == ino:
            return
        target = f"{self._root}/{rel}"
        self._make_parents(rel)
        if rel in self.have:
            self.cache.discard(target)
        elif rel in self.dirs:  # a directory in an older tree, a file now
            self._drop_dir(rel)
        link_or_copy(src, target)
        self.have[rel] = ino
        self.linked += 1

    def _make_parents(self, rel: str) -> None:
        parent = rel.rpartition("/")[0]
        if not parent or parent in self.dirs:
            return
        # A file (or symlink) in an older tree where a directory is needed now goes first.
        parts = parent.split("/")
        for prefix in ("/".join(parts[: i + 1]) for i in range(len(parts))):
            if prefix in self.have:
                self.cache.discard(f"{self._root}/{prefix}")
                del self.have[prefix]
        os.makedirs(f"{self._root}/{parent}", exist_ok=True)
        while parent and parent not in self.dirs:
            self.dirs.add(parent)
            parent = parent.rpartition("/")[0]

    def _drop_dir(self, rel: str) -> None:
        self.cache.discard(f"{self._root}/{rel}")
        self.dirs = {d for d in self.dirs if d != rel and not d.startswith(rel + "/")}
        self.have = {f: i for f, i in self.have.items() if not f.startswith(rel + "/")}

    def write(self, rel: str, data: str | bytes) -> None:
        """Make ``rel`` hold ``data`` (stored in the cache by content)."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        self.place(rel, self.cache.blob(raw))

    def take(self, src_root: Path, rel: str) -> list[str]:
        """Make ``rel`` hold every file under ``src_root`` (a scratch build), stored by content."""
        placed = []
        for base, dirs, files in os.walk(src_root):
            dirs.sort()
            sub = Path(base).relative_to(src_root).as_posix()
            for name in sorted(files):
                target = "/".join(p for p in (rel, sub, name) if p and p != ".")
                self.place(target, self.cache.blob_from(Path(base) / name))
                placed.append(target)
        return placed

    def sweep(self, which: Callable[[str], bool] = lambda rel: True) -> list[str]:
        """Remove the files (of ``which``) that are not wanted, then any directory left empty."""
        gone = sorted(r for r in self.have if r not in self.wanted and which(r))
        parents = set()
        for rel in gone:
            self.cache.discard(f"{self._root}/{rel}")
            del self.have[rel]
            parents.add(rel.rpartition("/")[0])
        for d in sorted(parents, key=lambda p: -p.count("/")):
            while d and d in self.dirs:
                try:
                    os.rmdir(f"{self._root}/{d}")
                except OSError:
                    break  # not empty
                self.dirs.discard(d)
                d = d.rpartition("/")[0]
        return gone


@dataclass(frozen=True, slots=True)
class Changes:
    """How a build differs from the site it replaces, as site-relative paths."""

    changed: tuple[str, ...]
    removed: tuple[str, ...]


def changes(tree: Tree, published: Path) -> Changes:
    """Files new or with other bytes than in ``published``, and files no longer there."""
    live, _dirs = inodes(published)
    changed = [
        rel
        for rel in sorted(tree.wanted)
        if rel not in live
        or (live[rel] != tree.have.get(rel) and not _same_bytes(tree.root / rel, published / rel))
    ]
    return Changes(tuple(changed), tuple(sorted(set(live) - set(tree.wanted))))


def _same_bytes(a: Path, b: Path, chunk: int = 1 << 20) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as fa, b.open("rb") as fb:
        while True:
            x, y = fa.read(chunk), fb.read(chunk)
            if x != y:
                return False
            if not x:
                return True


def workspace(out: Path) -> Path:
    """``<out>.tmp``: left from a failed build, or else the tree kept from the build before last.

    Only trees that carry the site marker get here (guard.check_outputs).
    """
    tmp, old = sibling(out, "tmp"), sibling(out, "old")
    if not tmp.exists() and old.is_dir():
        old.rename(tmp)
    return tmp


def mark(tree: Tree) -> None:
    """Put the site marker in the tree first, so that whatever happens next it is known as ours."""
    tree.write(SITE_MARKER, SITE_MARKER_TEXT)


def publish(tmp: Path, out: Path) -> None:
    """Swap the validated build in; the site it replaces is kept as the next build's workspace.

    Where the system can, ``<out>`` and ``<out>.tmp`` are exchanged in one step,
    so that ``<out>`` is the old site or the new one at every moment, even if
    the build is killed here.
    """
    old = sibling(out, "old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        if exchange(tmp, out):
            tmp.rename(old)  # the replaced site, now at <out>.tmp
            return
        out.rename(old)
    tmp.rename(out)


def shelve(tmp: Path, out: Path) -> None:
    """After a failure: keep the workspace for the next build, out of the way of ``<out>``."""
    old = sibling(out, "old")
    if tmp.exists() and not old.exists():
        tmp.rename(old)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
