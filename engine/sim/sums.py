"""Compiled sums along ticks and exact Poisson rows, bit for bit the numpy results.

Each loop adds in the order numpy does for the same data (see each function),
so swapping one for the other moves no number; ``tests/engine/test_sim_kernel.py``
compares them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.jit import COMPILED, compiled

Array = npt.NDArray[np.float64]


def _running_sum_py(xt: Any, out: Any) -> None:  # pragma: no cover
    ticks, lanes = xt.shape
    for j in range(lanes):
        out[0, j] = xt[0, j]
    for t in range(1, ticks):
        for j in range(lanes):
            out[t, j] = out[t - 1, j] + xt[t, j]


def _rolling_py(ct: Any, window: int, out: Any) -> None:  # pragma: no cover
    ticks, lanes = ct.shape
    w = min(window, ticks)
    for t in range(w):
        n = float(t + 1)
        for j in range(lanes):
            out[t, j] = ct[t, j] / n
    span = float(window)
    for t in range(w, ticks):
        for j in range(lanes):
            out[t, j] = (ct[t, j] - ct[t - w, j]) / span


def _poisson_rows_py(lam: Any, us: Any, order: Any, top: int, out: Any) -> None:  # pragma: no cover
    rows, n = out.shape
    cdf = np.empty(top + 1)
    for i in range(rows):
        term = 1.0
        cdf[0] = 1.0
        for k in range(1, top + 1):
            term = term * lam[i] / k
            cdf[k] = cdf[k - 1] + term
        total = cdf[top]
        k = 0
        for j in range(n):  # draws ascending, so the count never falls
            v = us[j] * total
            while k <= top and cdf[k] < v:
                k += 1
            out[i, order[j]] = k


def _lane_sums_py(x: Any, start: int, out: Any) -> None:  # pragma: no cover
    lanes, ticks = x.shape
    for j in range(lanes):
        out[j] = 0.0
    for t in range(start, ticks):
        for j in range(lanes):
            out[j] += x[j, t]


_running_sum: Callable[..., None] = compiled(_running_sum_py)
_rolling: Callable[..., None] = compiled(_rolling_py)
_lane_sums: Callable[..., None] = compiled(_lane_sums_py)
_poisson_rows: Callable[..., None] = compiled(_poisson_rows_py)


def running_sum_rows(xt: Array) -> Array:
    """``np.cumsum(xt, axis=0)`` of a C-ordered ``(ticks, lanes)`` array, the same adds in order."""
    out = np.empty_like(xt)
    _running_sum(xt, out)
    return out


def rolling_rows(ct: Array, window: int) -> Array:
    """Trailing mean over ``window`` ticks of the series whose running sum is ``ct``.

    ``ct`` is C-ordered ``(ticks, lanes)``; the arithmetic is that of
    :func:`engine.sim.rules.rolling_from` on its transpose.
    """
    out = np.empty_like(ct)
    _rolling(ct, window, out)
    return out


def poisson_rows_sorted(lam: Array, us: Array, order: npt.NDArray[np.intp], top: int) -> Array:
    """Exact Poisson counts, one mean per row, for draws ``us`` sorted ascending.

    ``order[j]`` is the column of sorted draw ``j``. The CDF of each row is built
    term by term to ``top`` as :func:`engine.sim.libm._cdf` builds it, and the
    count of draw ``u`` is the number of CDF steps below ``u * total``: the
    comparisons of :func:`engine.sim.libm.poisson_quantile`, taken by one merge
    walk instead of a search per draw.
    """
    out = np.empty((lam.size, us.size))
    _poisson_rows(lam, us, order, top, out)
    return out


def lane_sums(x: Array, start: int = 0) -> Array:
    """``x[:, start:].sum(axis=1)`` of a ``(lanes, ticks)`` array, the same bits.

    For a time-major view (lanes adjacent in memory) numpy adds tick after tick
    into each lane's total, a plain running sum; that is the order taken here.
    Any other layout is left to numpy, whose order there may be pairwise.
    """
    if not (COMPILED and x.ndim == 2 and x.strides[0] == x.itemsize and x.dtype == np.float64):
        return np.asarray(x[:, start:].sum(axis=1), dtype=np.float64)
    out = np.empty(x.shape[0])
    _lane_sums(x, start, out)
    return out
