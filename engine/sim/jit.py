"""numba where it is installed, plain Python where it is not: the same functions either way.

Compiled without fast-math, so IEEE semantics hold: no reassociation and no
fused multiply-add, and a compiled loop gives the bits of the same loop in
numpy or Python.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

# The numpy loops are the fallback where numba is not installed (it is a declared
# dependency; the fallback keeps the engine importable anywhere).
COMPILED = importlib.util.find_spec("numba") is not None
ENGINE = Path(__file__).resolve().parent.parent


@functools.cache
def sources_digest(root: Path = ENGINE) -> str:
    """A digest of every source file under ``root`` (path and bytes), in sorted order."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@functools.cache
def _stamp_every_source() -> None:
    """Make a cached kernel stale when any engine source changes, not only its own file.

    numba stamps a cached function with its own file alone, yet a kernel
    inlines helpers from other modules (engine/serving/kernel.py inlines
    engine/serving/step.py): after an edit to a helper, the old machine code
    would load and give the old numbers. The stamp here adds the digest of
    every engine source. (numba's locator classes are internal; the version is
    pinned in constraints.txt.)
    """
    from numba.core.caching import CacheImpl, InTreeCacheLocator

    class EngineLocator(InTreeCacheLocator):  # type: ignore[misc]
        def get_source_stamp(self) -> Any:
            return (super().get_source_stamp(), sources_digest())

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if not Path(py_file).resolve().is_relative_to(ENGINE):
                return None
            return super().from_function(py_func, py_file)

    CacheImpl._locator_classes.insert(0, EngineLocator)


def compiled(
    f: Callable[..., Any], inline: Literal["never", "always"] = "never"
) -> Callable[..., Any]:
    """``f`` compiled by numba (or ``f`` itself without numba).

    ``inline="always"`` inlines a helper into its callers. ``cache=True`` keeps
    the machine code beside the module (``__pycache__``, as Python keeps
    bytecode), so a process after the first loads it instead of compiling.
    """
    if not COMPILED:  # pragma: no cover
        return f
    from numba import njit

    _stamp_every_source()
    return njit(cache=True, inline=inline)(f)
