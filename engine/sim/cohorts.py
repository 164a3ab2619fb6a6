"""The cohort queue of a holding node: waiting work by arrival tick, per lane.

Counts are fluid (float requests), vectorised over *lanes* (load levels, and in a
batch several configs). Work is kept by arrival tick (a *cohort*) so every served
request has a known wait. A queue only ever changes at its ends: new work joins
as the newest cohort, service takes from the oldest (FIFO) or the newest
(adaptive LIFO), and ageing drops the oldest. So the cohorts of a lane that still
hold work form a doubly linked list in arrival order, and each operation walks
only the cohorts it takes: the cost per tick is a few cohorts per lane, not the
length of the queue (up to max age / tick = 600 cohorts).

A cohort is addressed by its flat index ``tick * lanes + lane`` into the
``(ticks, lanes)`` count array, so every gather is a 1-D ``take``; the arrival
tick of cohort ``k`` is ``k // lanes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
Index = npt.NDArray[np.int64]

# Counts below this are rounding residue of the fluid model, not requests.
DUST = 1e-9

# Pointers of a lane with nothing waiting: the oldest is "never old enough to age"
# and the newest "before every cohort".
# (int64 scalars, so that mixing them with 32-bit links never narrows them).
NO_OLDEST = np.int64(np.iinfo(np.int64).max)
NO_NEWEST = np.int64(-1)


@dataclass(slots=True)
class Cohorts:
    """Waiting work by arrival tick, per lane: the state of a holding queue.

    Attributes
    ----------
    counts : numpy.ndarray
        ``(ticks, lanes)``: requests still waiting from the cohort that arrived at
        a tick, in a lane [requests]. Only cohorts in a lane's list are meaningful.
    links : numpy.ndarray
        ``(2, ticks, lanes)``: flat index of the next newer (``links[0]``) and next
        older (``links[1]``) cohort of the lane that still waits; read only for
        cohorts in the list.
    ends : numpy.ndarray
        ``(2, lanes)``: flat index of the oldest (``ends[0]``) and newest
        (``ends[1]``) waiting cohort, or ``NO_OLDEST`` / ``NO_NEWEST`` when nothing
        waits. Index 0 is where FIFO serves and ``links[0]`` leads on from it;
        index 1 the same for LIFO.
    backlog : numpy.ndarray
        ``(lanes,)``: requests waiting in total (a running sum) [requests].
    """

    counts: Array
    links: Index
    ends: Index
    backlog: Array

    @classmethod
    def empty(
        cls, lanes: int, ticks: int, counts: Array | None = None, links: Index | None = None
    ) -> Cohorts:
        """A queue with nothing in it, for a run of ``ticks`` ticks.

        ``counts`` ``(ticks, lanes)`` and ``links`` ``(2, ticks, lanes)`` (of
        :func:`index_type`) may be passed in uninitialised (reused memory): a
        cohort is written before it is read.
        """
        return cls(
            np.empty((ticks, lanes)) if counts is None else counts,
            np.empty((2, ticks, lanes), dtype=index_type(ticks, lanes)) if links is None else links,
            np.array([[NO_OLDEST], [NO_NEWEST]], dtype=np.int64).repeat(lanes, axis=1),
            np.zeros(lanes),
        )

    @property
    def oldest(self) -> Index:
        """Flat index of each lane's oldest waiting cohort (a view of ``ends``)."""
        return self.ends[0]

    @property
    def newest(self) -> Index:
        """Flat index of each lane's newest waiting cohort (a view of ``ends``)."""
        return self.ends[1]

    @property
    def lanes(self) -> int:
        """Number of lanes [-]."""
        return int(self.backlog.size)

    @property
    def busy(self) -> bool:
        """Whether any lane has work waiting."""
        return bool(self.backlog.any())


def index_type(ticks: int, lanes: int) -> type[np.signedinteger[Any]]:
    """The smallest integer type that holds every link (and -1): int32 unless the run is huge."""
    return np.int32 if 2 * ticks * lanes < np.iinfo(np.int32).max else np.int64


def _clear(q: Cohorts, lanes: npt.NDArray[np.intp]) -> None:
    """Mark ``lanes`` empty: nothing waits, and no residue below ``DUST`` is kept."""
    q.ends[:, lanes] = _EMPTY
    q.backlog[lanes] = 0.0


_EMPTY = np.array([[NO_OLDEST], [NO_NEWEST]], dtype=np.int64)


def age_out(q: Cohorts, t: int, max_age_ticks: int) -> Array:
    """Remove work older than ``max_age_ticks`` at tick ``t``; return it per lane.

    A request that arrived at tick ``a`` has age ``t - a``; it is abandoned once
    its age exceeds ``max_age_ticks``. Cohorts are summed oldest first.
    """
    keep_from = (t - max_age_ticks) * q.lanes  # flat index of the first cohort kept
    aged = np.zeros(q.lanes)
    oldest = q.ends[0]
    hit = np.flatnonzero(oldest < keep_from)
    if hit.size == 0:
        return aged
    counts, newer = q.counts.reshape(-1), q.links[0].reshape(-1)
    k = oldest[hit]
    lost = counts.take(k)
    gone = k == q.ends[1, hit]  # that was the lane's last cohort
    oldest[hit] = np.where(gone, NO_OLDEST, newer.take(k))
    more = np.flatnonzero(oldest[hit] < keep_from)
    while more.size:  # a lane that skipped ticks: older cohorts still to drop, in order
        k = oldest[hit[more]]
        lost[more] = lost[more] + counts.take(k)
        last = k == q.ends[1, hit[more]]
        gone[more] |= last
        oldest[hit[more]] = np.where(last, NO_OLDEST, newer.take(k))
        more = more[oldest[hit[more]] < keep_from]
    aged[hit] = lost
    left = np.maximum(q.backlog[hit] - lost, 0.0)
    left[(left < DUST) | gone] = 0.0
    q.backlog[hit] = left
    _clear(q, hit[left == 0.0])
    return aged


def enqueue(q: Cohorts, t: int, admitted: Array) -> None:
    """Add this tick's admitted work as the newest cohort of every lane."""
    q.counts[t] = admitted
    q.backlog = q.backlog + admitted
    lanes = np.flatnonzero(admitted > 0.0)
    if lanes.size == 0:
        return
    k = t * q.lanes + lanes
    prev = q.ends[1, lanes]
    q.links[1].reshape(-1).put(k, prev)
    linked = prev != NO_NEWEST
    q.links[0].reshape(-1).put(prev[linked], k[linked])
    q.ends[1, lanes] = k
    q.ends[0, lanes[~linked]] = k[~linked]


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

    Notes
    -----
    The work taken is contiguous in arrival order: the oldest ``amount`` (FIFO) or
    the newest (LIFO). Walking the cohorts in serving order with ``before`` the
    work met ahead of a cohort, the cohort gives up
    ``min(max(amount - before, 0), count)``. The ``p`` quantile of the ages taken,
    youngest first, is the youngest cohort whose taken work, with everything
    younger taken, reaches ``p * amount``: under FIFO the last cohort with
    ``before <= (1 - p) * amount``, under LIFO the last with ``before < p * amount``.
    Both comparisons allow ``DUST``, the model's rounding residue, so a quantile
    that lands exactly on a cohort boundary in exact arithmetic stays there.
    """
    idx = np.flatnonzero(amount > 0.0)
    if idx.size:
        ages = t - _take(q, idx, amount[idx], lifo[idx].astype(np.intp)) // q.lanes
    head = np.where(q.backlog > 0.0, t - q.ends[0] // q.lanes, 0).astype(np.float64)
    w50, w99 = head.copy(), head.copy()
    if idx.size:
        w50[idx] = ages[0]
        w99[idx] = ages[1]
    return w50, w99, head


# How much of the amount may come before a cohort that holds the p50 / p99, per
# serving direction (rows: FIFO, LIFO) and quantile (columns), and the DUST
# allowance: FIFO ``before <= (1 - p) amount`` becomes ``before < (1 - p) amount
# + DUST``, LIFO ``before < p amount`` becomes ``before < p amount - DUST``.
_SHARE = np.array([[0.5, 1.0 - 0.99], [0.5, 0.99]])
_SLACK = np.array([DUST, -DUST])


def _take(q: Cohorts, idx: npt.NDArray[np.intp], amt: Array, d: Index) -> Index:
    """Walk lanes ``idx`` from end ``d`` (0 FIFO, 1 LIFO); return their p50 and p99 cohorts.

    ``(2, n)`` flat indices. Most lanes take everything from their first cohort,
    so that step is done for all lanes at once; only the rest pack their state
    and walk on.
    """
    counts, links = q.counts.reshape(-1), q.links.reshape(-1)
    first = q.ends[d, idx]
    end = q.ends[1 - d, idx]
    w = counts.take(first)
    res = w - np.minimum(amt, w)
    res[res < DUST] = 0.0
    counts.put(first, res)
    cols = np.stack([first, first])  # the first cohort holds both quantiles, unless...
    last = first.copy()  # the last cohort taken from, per lane
    on = np.flatnonzero((w < amt) & (first != end))
    if on.size:
        don = d[on]
        # rows: current cohort, far end, link offset, position; amount, p50 and
        # p99 limits on the work before the cohort, that work.
        ints = np.stack([first[on], end[on], don * counts.size, on])
        flts = np.concatenate([amt[None, on], amt[on] * _SHARE[don].T + _SLACK[don], w[None, on]])
        while True:
            k = links.take(ints[2] + ints[0])
            ints[0] = k
            pos = ints[3]
            last[pos] = k
            before = flts[3]
            cols[:, pos] = np.where(before < flts[1:3], k, cols[:, pos])
            w = counts.take(k)
            res = w - np.minimum(flts[0] - before, w)  # before < amount while walking
            res[res < DUST] = 0.0
            counts.put(k, res)
            before += w
            go = (before < flts[0]) & (k != ints[1])
            if not go.any():
                break
            ints, flts = ints[:, go], flts[:, go]
    _unlink_taken(q, idx, amt, d, last, end)
    return cols


def _unlink_taken(
    q: Cohorts, idx: npt.NDArray[np.intp], amt: Array, d: Index, last: Index, end: Index
) -> None:
    """Move each lane's served end past the cohorts emptied; settle the backlog.

    Every cohort the walk passed before ``last`` was emptied; ``last`` itself may
    keep a residue. ``end`` is the far end of each lane's list.
    """
    emptied = q.counts.reshape(-1).take(last) == 0.0
    beyond = q.links.reshape(-1).take(d * q.counts.size + last)
    q.ends[d, idx] = np.where(emptied, beyond, last)
    left = q.backlog[idx]
    left = np.where(amt >= left, 0.0, left - amt)
    left[(left < DUST) | (emptied & (last == end))] = 0.0
    q.backlog[idx] = left
    _clear(q, idx[left == 0.0])
