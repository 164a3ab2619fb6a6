"""Load sources: the offered rate over time and the seeded arrivals it produces.

Every source is scaled by a load level ``rps`` so one scenario can be swept: the
rate arrays have one row per level (a *lane*) and one column per tick. All lanes
share the same uniform draws (common random numbers), so lane ``i`` of a sweep is
bit-identical to a single run at level ``i`` and the sweep's verdicts move
monotonically with load instead of with sampling luck.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt
from backpressure.engine.rng import Mulberry32
from backpressure.engine.sim.libm import poisson_quantile, poisson_rows

Array = npt.NDArray[np.float64]


class Shape(StrEnum):
    """How the offered rate moves over the run."""

    CONSTANT = "constant"
    RAMP = "ramp"
    STEP = "step"
    BURSTY = "bursty"


class Arrivals(StrEnum):
    """How a rate becomes request counts per tick."""

    POISSON = "poisson"
    DETERMINISTIC = "deterministic"


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """A load source; ``rps`` is the level a sweep scales.

    Attributes
    ----------
    shape : Shape
        constant: ``rps`` throughout. ramp: from ``start_fraction * rps`` to ``rps``
        over ``ramp_s``, then held. step: ``base_fraction * rps`` outside
        [``at_s``, ``until_s``), ``rps`` inside. bursty: mean ``rps`` modulated by
        a multiplicative cascade (see :func:`cascade`).
    rps : float
        Load level [requests/s].
    arrivals : Arrivals
        poisson (seeded, default) or deterministic (exactly rate x tick, for tests).
    """

    shape: Shape = Shape.CONSTANT
    rps: float = 100.0
    arrivals: Arrivals = Arrivals.POISSON
    start_fraction: float = 0.0
    ramp_s: float = 60.0
    base_fraction: float = 0.0
    at_s: float = 0.0
    until_s: float | None = None
    burst_bias: float = 0.6


def shape_profile(spec: SourceSpec, ticks: int, tick_s: float, rng: Mulberry32) -> Array:
    """Rate multiplier per tick, so that ``rate = level * profile`` [-].

    Draws ``2**ceil(log2 ticks) - 1`` uniforms from ``rng`` for a bursty source and
    none otherwise.
    """
    t = np.arange(ticks, dtype=np.float64) * tick_s
    if spec.shape is Shape.RAMP:
        frac = np.minimum(t / spec.ramp_s, 1.0) if spec.ramp_s > 0 else np.ones(ticks)
        return spec.start_fraction + (1.0 - spec.start_fraction) * frac
    if spec.shape is Shape.STEP:
        until = np.inf if spec.until_s is None else spec.until_s
        inside = (t >= spec.at_s - 1e-9) & (t < until - 1e-9)
        return np.where(inside, 1.0, spec.base_fraction)
    if spec.shape is Shape.BURSTY:
        return cascade(ticks, spec.burst_bias, rng)
    return np.ones(ticks, dtype=np.float64)


def cascade(ticks: int, bias: float, rng: Mulberry32) -> Array:
    """Bursty multipliers from a b-model multiplicative cascade, mean 1 over the run.

    Parameters
    ----------
    ticks : int
        Length of the run [ticks].
    bias : float
        Share of an interval's traffic that goes to the busier half, in [0.5, 1) [-].
        0.5 is smooth; 0.7 is very bursty.
    rng : Mulberry32
        Source of the coin flips (one per split).

    Returns
    -------
    numpy.ndarray
        Multipliers of shape ``(ticks,)`` whose mean is 1.

    Notes
    -----
    This is an approximation of self-similar traffic, NOT fractional Brownian
    motion or fractional Gaussian noise: the run is halved again and again and
    each half is given ``bias`` or ``1 - bias`` of its parent's volume at random,
    so bursts nest inside bursts over every scale from the run down to one tick.
    That reproduces the look of measured bursty traffic (burstiness that does not
    average out at coarser scales) with no control over the Hurst parameter and no
    long-range correlation beyond the run.

    References
    ----------
    M. Wang, T. Madhyastha, N. H. Chan, S. Papadimitriou, C. Faloutsos, "Data
    mining meets performance evaluation: fast algorithms for modeling bursty
    traffic", ICDE 2002.
    """
    levels = (max(ticks, 1) - 1).bit_length()  # 2**levels >= ticks, no libm
    mult = np.ones(1, dtype=np.float64)
    for _ in range(levels):
        flips = rng.block(mult.size) < 0.5
        left = np.where(flips, 2.0 * bias, 2.0 * (1.0 - bias))
        mult = np.stack([mult * left, mult * (2.0 - left)], axis=1).reshape(-1)
    mult = mult[:ticks]
    # Renormalise the truncated run to mean 1 with a sequential (order-fixed) sum.
    return mult * (ticks / np.cumsum(mult)[-1])


def offered_rates(
    spec: SourceSpec, levels: Array, ticks: int, tick_s: float, rng: Mulberry32
) -> Array:
    """Offered rate per lane and tick [requests/s], shape ``(lanes, ticks)``."""
    profile = shape_profile(spec, ticks, tick_s, rng)
    return np.asarray(levels, np.float64)[:, None] * profile[None, :]


def arrivals(spec: SourceSpec, rates: Array, tick_s: float, rng: Mulberry32) -> Array:
    """Requests arriving per lane and tick, shape of ``rates``.

    Poisson arrivals use one uniform per tick shared by all lanes, inverted
    through each lane's own Poisson CDF; deterministic arrivals are the fluid
    ``rate * tick`` and draw nothing.
    """
    lam = rates * tick_s
    if spec.arrivals is Arrivals.DETERMINISTIC:
        return lam
    u = rng.block(rates.shape[1])
    if spec.shape is Shape.CONSTANT and lam.size:  # one mean per lane: the same counts, faster
        return poisson_rows(lam[:, 0], u)
    return poisson_quantile(lam, np.broadcast_to(u[None, :], lam.shape))
