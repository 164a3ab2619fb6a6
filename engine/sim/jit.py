"""numba where it is installed, plain Python where it is not: the same functions either way.

Compiled without fast-math, so IEEE semantics hold: no reassociation and no
fused multiply-add, and a compiled loop gives the bits of the same loop in
numpy or Python.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, Literal

# The numpy loops are the fallback where numba is not installed (it is a declared
# dependency; the fallback keeps the engine importable anywhere).
COMPILED = importlib.util.find_spec("numba") is not None


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

    return njit(cache=True, inline=inline)(f)
