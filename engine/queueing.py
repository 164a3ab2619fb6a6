"""Queueing pieces of the tick simulation: the M/M/1 curve, the disciplines, cohorts.

Counts are fluid (float requests), vectorised over *lanes*: one lane per load
level of a sweep, so every array here has the lane axis first.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

# Utilization at which the M/M/1 factor is capped. Beyond it the fluid backlog of
# the tick loop carries the waiting explicitly; the closed form would diverge.
RHO_CAP = 0.99

# Counts below this are rounding residue of the fluid model, not requests.
DUST = 1e-9


def mm1_factor(rho: Array | float) -> Array:
    """M/M/1 slowdown: mean time in system over service time, ``1 / (1 - rho)``.

    Parameters
    ----------
    rho : numpy.ndarray or float
        Utilization [-], clipped to [0, ``RHO_CAP``].

    Returns
    -------
    numpy.ndarray
        The factor [-]: 1 when idle, 10 at 90 %, 20 at 95 %, 100 at the cap.

    Notes
    -----
    In an M/M/1 queue the time in system is exponential with mean
    ``S / (1 - rho)``, so every quantile scales by this factor too.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975, §3.2.

    Examples
    --------
    >>> float(mm1_factor(0.5))
    2.0
    """
    r = np.clip(np.asarray(rho, dtype=np.float64), 0.0, RHO_CAP)
    return 1.0 / (1.0 - r)


class Discipline(StrEnum):
    """What a node does with work it cannot serve this tick."""

    SHED = "shed"
    BUFFER = "buffer"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class DisciplineRule:
    """Behaviour of one discipline.

    Attributes
    ----------
    holds : bool
        Keeps unserved work as backlog for later ticks (up to the node's max depth).
    overflow : {"drop", "refuse"}
        drop: work beyond the intake room is lost here. refuse: it is turned away
        at intake and stays with the upstream node (or is lost at the source).
    ages_out : bool
        Abandons queued work older than the node's max age.
    """

    holds: bool
    overflow: Literal["drop", "refuse"]
    ages_out: bool


# The registry: a literal mapping, nothing registers itself on import.
DISCIPLINES: dict[Discipline, DisciplineRule] = {
    Discipline.SHED: DisciplineRule(holds=False, overflow="drop", ages_out=False),
    Discipline.BUFFER: DisciplineRule(holds=True, overflow="drop", ages_out=True),
    Discipline.BLOCK: DisciplineRule(holds=True, overflow="refuse", ages_out=True),
}


@dataclass(slots=True)
class Cohorts:
    """Waiting work by arrival tick, per lane: the state of a holding queue.

    Attributes
    ----------
    counts : numpy.ndarray
        ``(lanes, ticks)``: requests still waiting from each arrival tick.
    lo : int
        First tick column that may still hold work; older columns are empty.
    backlog : numpy.ndarray
        ``(lanes,)``: requests waiting in total.
    """

    counts: Array
    lo: int
    backlog: Array

    @classmethod
    def empty(cls, lanes: int, ticks: int) -> Cohorts:
        """A queue with nothing in it."""
        return cls(np.zeros((lanes, ticks)), 0, np.zeros(lanes))

    @property
    def busy(self) -> bool:
        """Whether any lane has work waiting."""
        return bool(self.backlog.any())


def age_out(q: Cohorts, t: int, max_age_ticks: int) -> Array:
    """Remove work older than ``max_age_ticks`` at tick ``t``; return it per lane.

    A request that arrived at tick ``a`` has age ``t - a``; it is abandoned once
    its age exceeds ``max_age_ticks``.
    """
    aged = np.zeros(q.backlog.shape)
    oldest_kept = t - max_age_ticks
    while q.lo < oldest_kept:  # normally one column per tick; sequential sum
        aged = aged + q.counts[:, q.lo]
        q.counts[:, q.lo] = 0.0
        q.lo += 1
    if aged.any():
        q.backlog = np.maximum(q.backlog - aged, 0.0)
        q.backlog[q.backlog < DUST] = 0.0
    return aged


def enqueue(q: Cohorts, t: int, admitted: Array) -> None:
    """Add this tick's admitted work as the newest cohort."""
    q.counts[:, t] = admitted
    q.backlog = q.backlog + admitted
    q.lo = min(q.lo, t)


def serve(q: Cohorts, t: int, amount: Array, lifo: Mask) -> tuple[Array, Array, Array]:
    """Take ``amount`` per lane out of the queue, oldest first or newest first.

    Parameters
    ----------
    q : Cohorts
        The queue; changed in place.
    t : int
        Current tick.
    amount : numpy.ndarray
        Work to take per lane [requests]; at most the backlog.
    lifo : numpy.ndarray
        Per lane: serve newest first (adaptive LIFO) instead of oldest first.

    Returns
    -------
    tuple of numpy.ndarray
        ``(wait_p50, wait_p99, head_age)`` per lane in ticks: the 50th and 99th
        percentile age of the work taken (the head age when nothing was taken), and
        the age of the oldest work still waiting (0 when empty).
    """
    window = q.counts[:, q.lo : t + 1]
    cum = np.cumsum(window, axis=1)
    total = cum[:, -1]
    excl = cum - window  # work older than each column
    # Work that goes before each column: older work (FIFO) or newer work (LIFO).
    ahead = np.where(lifo[:, None], total[:, None] - cum, excl)
    take = np.minimum(np.maximum(amount[:, None] - ahead, 0.0), window)
    served_from = window.shape[1] - 1  # column index of age 0
    p50 = _age_quantile(excl, total, amount, lifo, 0.5, served_from)
    p99 = _age_quantile(excl, total, amount, lifo, 0.99, served_from)
    window -= take
    window[window < DUST] = 0.0
    q.backlog = np.where(amount >= total, 0.0, total - amount)
    q.backlog[q.backlog < DUST] = 0.0
    waiting = window > 0.0
    head = np.where(q.backlog > 0.0, served_from - np.argmax(waiting, axis=1), 0)
    idle = amount <= 0.0
    p50 = np.where(idle, head, p50).astype(np.float64)
    p99 = np.where(idle, head, p99).astype(np.float64)
    if q.backlog.any():
        q.lo += int(np.argmax(waiting.any(axis=0)))
    else:
        q.lo = t + 1
    return p50, p99, head.astype(np.float64)


def _age_quantile(excl: Array, total: Array, amount: Array, lifo: Mask, p: float,
                  newest: int) -> npt.NDArray[np.int64]:
    """Age in ticks of the ``p`` quantile of the work taken, youngest first.

    Taken work is contiguous: the oldest ``amount`` (FIFO) or the newest (LIFO).
    Work at most as old as column ``j`` reaches ``p * amount`` exactly when the
    work older than ``j`` is at most ``(1 - p) * amount`` (FIFO) or
    ``total - p * amount`` (LIFO); the newest such column gives the quantile.
    """
    limit = np.where(lifo, total - p * amount, (1.0 - p) * amount)
    column = (excl <= limit[:, None]).sum(axis=1) - 1
    return newest - column
