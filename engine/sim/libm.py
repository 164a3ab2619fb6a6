"""Platform-independent elementary functions for the simulation.

Tick files must be byte-identical on every platform. IEEE 754 makes ``+ - * /``
and ``sqrt`` correctly rounded everywhere, but ``log`` and ``exp`` come from the
platform's libm (or numpy's SIMD kernels) and may differ in the last bit. The
few transcendental values the simulation needs are therefore built here from
basic operations only, so the same inputs give the same bits on every machine.
Accuracy is ~1e-15 relative, far below anything the output shows.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.jit import COMPILED, compiled
from backpressure.engine.sim.sums import poisson_rows_sorted

Array = npt.NDArray[np.float64]

LN2 = 0.6931471805599453  # ln 2, the double nearest to it
LN100 = 4.605170185988092  # ln 100 = -ln(1 - 0.99): the 99th percentile of Exp(1)

# Acklam's rational approximation of the inverse normal CDF (relative error
# below 1.15e-9). Reference: P. J. Acklam, "An algorithm for computing the
# inverse normal cumulative distribution function" (2003), archived at
# https://web.archive.org/web/20151030215612/http://home.online.no/~pjacklam/notes/invnorm/
_A = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
_B = (
    -5.447609879822406e01,
    1.615858368580409e02,
    -1.556989798598866e02,
    6.680131188771972e01,
    -1.328068155288572e01,
)
_C = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
_P_LOW = 0.02425


def ln(x: Array) -> Array:
    """Natural logarithm from basic operations only.

    Parameters
    ----------
    x : numpy.ndarray
        Positive finite values.

    Returns
    -------
    numpy.ndarray
        ``ln(x)``, identical on every IEEE 754 platform.

    Notes
    -----
    ``x = m * 2**e`` with ``m`` in [0.5, 1) (``frexp`` is exact); then
    ``ln m = 2 atanh(s)`` with ``s = (m - 1) / (m + 1)`` in (-1/3, 0], summed as a
    fixed 18-term odd series (|s|**37 / 37 < 1e-19).
    """
    m, e = np.frexp(x)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    total = np.zeros_like(s)
    for k in range(35, 0, -2):  # Horner form of s * sum s**(2j) / (2j + 1)
        total = total * s2 + 1.0 / k
    return 2.0 * s * total + e.astype(np.float64) * LN2


def _ln_scalar_py(x: float) -> float:
    """:func:`ln` of one value: the same operations in the same order, so the same bits."""
    m, e = math.frexp(x)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    total = 0.0
    for k in range(35, 0, -2):
        total = total * s2 + 1.0 / k
    return 2.0 * s * total + float(e) * LN2


ln_scalar = compiled(_ln_scalar_py, "always")


def inverse_normal(u: Array) -> Array:
    """Standard normal quantile ``z`` with ``Phi(z) = u`` (Acklam's algorithm).

    Parameters
    ----------
    u : numpy.ndarray
        Probabilities strictly inside (0, 1).

    Returns
    -------
    numpy.ndarray
        Quantiles; relative error below 1.15e-9.
    """
    q = u - 0.5
    r = q * q
    num = ((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]
    den = ((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1.0
    central = num * q / den
    tail_p = np.minimum(u, 1.0 - u)
    t = np.sqrt(-2.0 * ln(np.maximum(tail_p, 1e-300)))
    num = ((((_C[0] * t + _C[1]) * t + _C[2]) * t + _C[3]) * t + _C[4]) * t + _C[5]
    den = (((_D[0] * t + _D[1]) * t + _D[2]) * t + _D[3]) * t + 1.0
    tail = np.where(u < 0.5, num / den, -num / den)
    return np.where(tail_p < _P_LOW, tail, central)


# Below this many expected arrivals per tick the count is drawn by exact
# inversion; above it the Poisson skew is small enough (1/sqrt(50) = 0.14) for a
# normal quantile with a Cornish-Fisher skew term.
EXACT_POISSON_BELOW = 50.0


def poisson_quantile(lam: Array, u: Array) -> Array:
    """Poisson counts by inverting the CDF at ``u``: one uniform per count.

    Parameters
    ----------
    lam : numpy.ndarray
        Expected counts per tick [requests], >= 0.
    u : numpy.ndarray
        Uniform draws in [0, 1), broadcastable against ``lam``.

    Returns
    -------
    numpy.ndarray
        Counts (as float64) with ``lam``'s shape; monotone in ``lam`` for a fixed ``u``.

    Notes
    -----
    For ``lam < 50`` the count is exact: the smallest ``k`` with CDF(k) >= u,
    with the CDF built from unnormalised terms ``lam**k / k!`` (no ``exp``).
    For larger ``lam`` it is ``ceil(lam + sqrt(lam) z + (z**2 - 1) / 6 - 0.5)``,
    the Cornish-Fisher expansion of the Poisson quantile with a continuity
    correction, ``z`` the normal quantile of ``u``. Every count depends on its own
    ``lam`` and ``u`` only, so any batch of them gives the same bits as one at a time.
    """
    lam, u = np.broadcast_arrays(np.asarray(lam, np.float64), np.asarray(u, np.float64))
    u = u + 2.0**-33  # centre the 2**-32 grid so u is never exactly 0
    small = lam < EXACT_POISSON_BELOW
    if small.all():  # the usual case: no masks needed
        return _poisson_exact(lam.reshape(-1), u.reshape(-1)).reshape(lam.shape)
    out = np.empty(lam.shape, dtype=np.float64)
    big = ~small
    lb, z = lam[big], inverse_normal(u[big])
    out[big] = np.maximum(np.ceil(lb + np.sqrt(lb) * z + (z * z - 1.0) / 6.0 - 0.5), 0.0)
    if small.any():
        out[small] = _poisson_exact(lam[small], u[small])
    return out


# A run of equal means at least this long (a lane of a constant source) shares
# one CDF table instead of building the terms for every count.
TABLE_RUN = 32


def _poisson_exact(lam: Array, u: Array) -> Array:
    """Exact inversion for small means: count CDF steps below ``u`` (1-D inputs).

    The terms run to ``top`` for the largest mean; for any smaller mean the terms
    past its own ``lam + 12 sqrt(lam) + 12`` are below half an ulp of its CDF total,
    so adding them changes no bit and the count does not depend on the batch.
    """
    top = int(np.ceil(lam.max() + 12.0 * np.sqrt(lam.max()) + 12.0)) if lam.size else 0
    starts = np.flatnonzero(np.concatenate(([True], lam[1:] != lam[:-1]))) if lam.size else lam
    if starts.size * TABLE_RUN > lam.size:
        cdf = _cdf(lam, top)
        below = cdf < u[..., None] * cdf[..., -1:]
        return below.sum(axis=-1).astype(np.float64)
    # Runs of one mean: one table per run, then a binary search per count.
    cdf = _cdf(lam[starts], top)
    total = cdf[:, -1]
    ends = np.append(starts[1:], lam.size)
    out = np.empty(lam.size, dtype=np.float64)
    for run, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        out[a:b] = np.searchsorted(cdf[run], u[a:b] * total[run], side="left")
    return out


def _cdf(lam: Array, top: int) -> Array:
    """Unnormalised Poisson CDF ``sum_{j<=k} lam**j / j!`` for ``k = 0..top``, summed in order."""
    term = np.ones_like(lam)
    terms = [term]
    for k in range(1, top + 1):
        term = term * lam / k
        terms.append(term)
    return np.cumsum(np.stack(terms, axis=-1), axis=-1)


def poisson_rows(lam: Array, u: Array) -> Array:
    """``poisson_quantile(lam[:, None], u[None, :])``: one mean per row, same draws in each.

    Parameters
    ----------
    lam : numpy.ndarray
        Expected count per row (a lane of a constant source) [requests], >= 0.
    u : numpy.ndarray
        Uniform draws in [0, 1), one per column (tick).

    Returns
    -------
    numpy.ndarray
        Counts of shape ``(rows, columns)``, bit for bit those of
        :func:`poisson_quantile`.

    Notes
    -----
    The draws are sorted once. For sorted draws ``v_j = u_j * total`` never falls,
    so CDF step ``k`` of a row is passed by exactly the draws from position
    ``p_k = #{j : v_j <= cdf_k}`` on, and the count at position ``j`` is the number
    of steps with ``p_k <= j``. Each ``p_k`` is found by one binary search on
    ``cdf_k / total`` and then moved until the products themselves, compared as
    in :func:`poisson_quantile`, agree.
    """
    lam = np.asarray(lam, np.float64)
    if lam.size and lam.max() >= EXACT_POISSON_BELOW and COMPILED:
        return _poisson_rows_mixed(lam, np.asarray(u, np.float64))
    if lam.size == 0 or lam.max() >= EXACT_POISSON_BELOW:
        return poisson_quantile(lam[:, None], np.asarray(u, np.float64)[None, :])
    u = np.asarray(u, np.float64) + 2.0**-33  # as poisson_quantile
    n = u.size
    order = np.argsort(u, kind="stable")
    us = u[order]
    top = int(np.ceil(lam.max() + 12.0 * np.sqrt(lam.max()) + 12.0))
    if COMPILED:
        return poisson_rows_sorted(lam, us, order, top)
    cdf = _cdf(lam, top)
    total = cdf[:, -1:]
    pos = np.searchsorted(us, (cdf / total).reshape(-1), side="right").reshape(cdf.shape)
    while True:  # the division may round either way: a step or two at most
        down = (pos > 0) & (us[np.maximum(pos - 1, 0)] * total > cdf)
        up = (pos < n) & (us[np.minimum(pos, n - 1)] * total <= cdf)
        if not (down.any() or up.any()):
            break
        pos += up.astype(np.intp) - down.astype(np.intp)
    steps = np.bincount(
        (np.arange(lam.size)[:, None] * (n + 1) + pos).reshape(-1), minlength=lam.size * (n + 1)
    ).reshape(lam.size, n + 1)
    out = np.empty((lam.size, n), dtype=np.float64)
    out[:, order] = np.cumsum(steps, axis=1)[:, :n]
    return out


def _poisson_rows_mixed(lam: Array, u: Array) -> Array:
    """:func:`poisson_rows` when some rows have a mean of 50 or more, the same bits.

    Those rows take :func:`poisson_quantile`'s normal branch with one ``z`` per
    draw shared by every row (it is elementwise, so computing it once changes no
    bit); the others are counted exactly by :func:`poisson_rows`.
    """
    out = np.empty((lam.size, u.size))
    big = lam >= EXACT_POISSON_BELOW
    lb = lam[big][:, None]
    z = inverse_normal(u + 2.0**-33)[None, :]  # as poisson_quantile
    out[big] = np.maximum(np.ceil(lb + np.sqrt(lb) * z + (z * z - 1.0) / 6.0 - 0.5), 0.0)
    if not big.all():
        out[~big] = poisson_rows(lam[~big], u)
    return out
