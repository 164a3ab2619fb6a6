"""What a build may touch: its own directories only, one build per output at a time.

``build --out DIR`` replaces ``DIR`` and keeps ``DIR.old``, ``DIR.tmp``,
``DIR.cache`` and ``DIR.sweep`` beside it. Each must be absent, empty, or
something this program wrote, which says so with a marker: a site tree
(published, ``.old`` or ``.tmp``) holds :data:`SITE_MARKER`, a sweep directory
:data:`SWEEP_MARKER`, the render cache its ``FORMAT`` file. Anything else is
someone's data, and the build refuses to start rather than move it.

One build at a time per output: :func:`build_lock` holds an exclusive
``fcntl`` lock on ``DIR.lock`` for the whole build (sweep included); a second
build fails at once with a clear message. The lock dies with its process, so a
killed build never leaves it held.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from backpressure.generator.manifest import MARKER
from backpressure.generator.site.publish.assemble import SITE_MARKER, SiteError

SITE_MARKER_TEXT = (
    "This directory is a site built by backpressure (backpressure build --out).\n"
    "A later build may replace it; the build refuses any directory without this file.\n"
)
SWEEP_MARKER = MARKER  # written by generator/manifest.py before any sweep file
_HELD: set[str] = set()


def sibling(out: Path, suffix: str) -> Path:
    """``out`` with ``.suffix`` appended to its name (``site`` -> ``site.old``)."""
    return out.with_name(f"{out.name}.{suffix}")


def _is_ours(path: Path, marker: str) -> bool:
    """Absent, an empty directory, or a directory holding ``marker``."""
    if not path.exists() and not path.is_symlink():
        return True
    if path.is_symlink() or not path.is_dir():
        return False
    if (path / marker).is_file():
        return True
    with os.scandir(path) as it:
        return next(it, None) is None


def check_site_dir(path: Path) -> None:
    """Refuse unless ``path`` is absent, empty or a site tree a build made."""
    if not _is_ours(path, SITE_MARKER):
        raise SiteError(
            f"{path} exists and is not a site this program built (it has no {SITE_MARKER}); "
            "refusing to replace it: move it away or empty it"
        )


# Every name a sweep writes. A directory holding only these (a sweep from before
# the marker existed, say) loses nothing when a sweep replaces them.
_SWEEP_NAMES = frozenset(
    {"results.csv", "curves.jsonl", "inputs.json", "manifest.json", SWEEP_MARKER}
)


def _only_sweep_files(path: Path) -> bool:
    return path.is_dir() and all(
        p.name.removesuffix(".tmp") in _SWEEP_NAMES and p.is_file() for p in path.iterdir()
    )


def check_sweep_dir(path: Path) -> None:
    """Refuse unless ``path`` is absent, empty, marked, or holds only files a sweep writes."""
    if not _is_ours(path, SWEEP_MARKER) and not _only_sweep_files(path):
        raise SiteError(
            f"{path} exists and is not a sweep this program wrote (it has no {SWEEP_MARKER}); "
            "refusing to write into it: move it away or empty it"
        )


def check_outputs(out: Path) -> None:
    """Every directory a build of ``out`` replaces or reuses is absent, empty or ours."""
    for path in (out, sibling(out, "tmp"), sibling(out, "old")):
        check_site_dir(path)


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold ``<out>.lock`` exclusively for the block (re-entrant within this process)."""
    path = sibling(out, "lock")
    key = str(path.resolve())
    if key in _HELD:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise SiteError(f"cannot open the build lock {path}: {exc.strerror or exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SiteError(
                f"another build is writing {out} (it holds {path}); wait for it to finish"
            ) from None
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# renameat2(2) with RENAME_EXCHANGE swaps two paths in one step (Linux 3.15+, on
# ext4, xfs, btrfs, tmpfs): there is no moment without a published site.
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


_EXCHANGE = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` atomically; False where the system cannot (then nothing moved)."""
    if _EXCHANGE is None:
        return False
    done = _EXCHANGE(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))
