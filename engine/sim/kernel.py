"""A compiled tick loop for the commonest node: an LLM server with its own queue.

The sweep's rig is one such node per config (load -> LLM with a buffering queue),
and the numpy tick loop spends most of its time in per-tick overhead and
gathers over lanes. This is the same arithmetic written lane by lane and
compiled with numba: every float operation is the one
:func:`engine.sim.nodes.begin`, :func:`engine.sim.nodes.advance` and
:mod:`engine.sim.cohorts` perform for that lane, in the same order, so the
records are bit-identical (``tests/engine/test_sim_kernel.py`` compares the two
paths exactly). Without fastmath, numba keeps IEEE semantics: no reassociation
and no fused multiply-add.

State per lane mirrors :class:`engine.sim.cohorts.Cohorts` with arrival ticks
instead of flat indices: ``counts[tick, lane]`` and the links ``newer`` /
``older`` between the waiting cohorts, the oldest and newest waiting tick
(``-1`` when nothing waits), and the running backlog.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.cohorts import DUST
from backpressure.engine.sim.jit import compiled
from backpressure.engine.sim.llm import first_token_s as _first_token_s
from backpressure.engine.sim.llm import slot_s as _slot_s
from backpressure.engine.sim.sums import (
    lane_sums,
    poisson_rows_sorted,
    rolling_rows,
    running_sum_rows,
)

Array = npt.NDArray[np.float64]

NONE = -1  # no cohort
# The quantile shares and rounding allowance of engine.sim.cohorts._take, per
# serving direction (0 FIFO, 1 LIFO): (share p50, share p99, slack).
FIFO_SHARE = (0.5, 1.0 - 0.99, DUST)
LIFO_SHARE = (0.5, 0.99, -DUST)


def llm_queue_loop(
    offered: Array,
    out: tuple[Array, ...],
    waits: tuple[Any, Any],
    lane: tuple[Any, ...],
    state: tuple[Any, ...],
    max_age: int,
    lifo_on: bool,
    lifo_after_s: float,
    tick_s: float,
) -> None:
    """Every tick of an LLM node with a holding queue and no blocking child.

    Parameters
    ----------
    offered : numpy.ndarray
        ``(ticks, lanes)`` work arriving per tick [requests].
    out : tuple of numpy.ndarray
        ``(admitted, served, backlog, dropped_aged, inflight, slot_time_s,
        first_token_s)``, each ``(ticks, lanes)``, written every tick.
    waits : tuple of numpy.ndarray
        ``(wait_p50_ticks, wait_p99_ticks)``, ``(ticks, lanes)`` integer arrays.
    lane : tuple of numpy.ndarray
        Per-lane numbers ``(depth, costs, experts, ints)``: the queue depth, and the
        LLM's packed step costs, distinct-experts tables and integer limits as
        :class:`engine.sim.model.LlmLanes` holds them.
    state : tuple of numpy.ndarray
        Scratch ``(counts, newer, older)``, each ``(ticks, lanes)``, uninitialised.
        Tick-major: lanes of one config move alike, so the lanes' queue ends sit
        in the same few rows (lane-major measured 1.7x slower).
    max_age : int
        Ticks after which waiting work is abandoned; negative for never.
    lifo_on : bool
        Whether the node switches to newest-first when its head is old.
    lifo_after_s : float
        Head age that switches a lane to newest-first [s].
    tick_s : float
        Tick length [s].
    """
    _loop(offered, *out, *waits, *lane, *state, max_age, lifo_on, lifo_after_s, tick_s)


def _loop_py(
    offered: Any,
    admitted_o: Any,
    served_o: Any,
    backlog_o: Any,
    aged_o: Any,
    inflight_o: Any,
    slot_o: Any,
    first_o: Any,
    w50_o: Any,
    w99_o: Any,
    depth: Any,
    costs: Any,
    experts: Any,
    ints: Any,
    counts: Any,
    newer: Any,
    older: Any,
    max_age: int,
    lifo_on: bool,
    lifo_after_s: float,
    tick_s: float,
) -> None:  # pragma: no cover
    ticks, lanes = offered.shape
    # Ticks outer, lanes inner: the records are (ticks, lanes), written in order.
    backlogs = np.zeros(lanes)
    inflights = np.zeros(lanes)
    lifos = np.zeros(lanes, dtype=np.bool_)
    oldests = np.full(lanes, NONE, dtype=np.int64)
    newests = np.full(lanes, NONE, dtype=np.int64)
    for t in range(ticks):
        for j in range(lanes):
            backlog, oldest, newest = backlogs[j], oldests[j], newests[j]
            # begin(): age out, free finished slots, state the room
            aged = 0.0
            if max_age >= 0 and oldest != NONE and oldest < t - max_age:
                aged, oldest, newest, backlog = _age_out(
                    counts, newer, j, t - max_age, oldest, newest, backlog
                )
            b = inflights[j]
            c, e = costs[j], experts[j]
            held, p, o, budget, ub = ints[0, j], ints[1, j], ints[2, j], ints[3, j], ints[4, j]
            slot_s = _slot_s(c, e, held, p, o, budget, ub, b)
            first_s = _first_token_s(c, e, held, p, o, budget, ub, b)
            done = min(b, b * tick_s / slot_s)
            cap = held - b + done
            # advance(): admit; queue and serve unless all of it starts at once
            admitted = min(offered[t, j], max(cap + depth[j] - backlog, 0.0))
            started, w50, w99 = admitted, 0, 0
            if backlog > 0.0 or admitted > cap:
                counts[t, j] = admitted
                backlog = backlog + admitted
                if admitted > 0.0:
                    oldest, newest = _enqueue(newer, older, t, j, oldest, newest)
                started = min(backlog, cap)
                w50, w99, head, oldest, newest, backlog = _serve(
                    counts, newer, older, t, j, started, lifos[j], oldest, newest, backlog
                )
                if lifo_on:
                    lifos[j] = head * tick_s > lifo_after_s
            admitted_o[t, j] = admitted
            backlog_o[t, j] = backlog
            w50_o[t, j] = w50
            w99_o[t, j] = w99
            aged_o[t, j] = aged
            inflights[j] = b - done + started
            served_o[t, j] = done
            inflight_o[t, j] = inflights[j]
            slot_o[t, j] = slot_s
            first_o[t, j] = first_s
            backlogs[j], oldests[j], newests[j] = backlog, oldest, newest


def _age_out_py(
    counts: Any, newer: Any, j: int, keep_from: int, oldest: int, newest: int, backlog: float
) -> tuple[float, int, int, float]:  # pragma: no cover
    """Drop lane ``j``'s cohorts older than tick ``keep_from``, oldest first (``age_out``)."""
    k = oldest
    lost = counts[k, j]
    gone = k == newest
    oldest = NONE if gone else newer[k, j]
    while oldest != NONE and oldest < keep_from:
        k = oldest
        lost = lost + counts[k, j]
        last = k == newest
        gone = gone or last
        oldest = NONE if last else newer[k, j]
    left = max(backlog - lost, 0.0)
    if left < DUST or gone:
        return lost, NONE, NONE, 0.0
    return lost, oldest, newest, left


def _enqueue_py(
    newer: Any, older: Any, t: int, j: int, oldest: int, newest: int
) -> tuple[int, int]:  # pragma: no cover
    """Link tick ``t``'s cohort as lane ``j``'s newest (``enqueue``)."""
    older[t, j] = newest
    if newest != NONE:
        newer[newest, j] = t
        return oldest, t
    return t, t


def _serve_py(
    counts: Any,
    newer: Any,
    older: Any,
    t: int,
    j: int,
    amt: float,
    lifo: bool,
    oldest: int,
    newest: int,
    backlog: float,
) -> tuple[int, int, int, int, int, float]:  # pragma: no cover
    """Take ``amt`` from lane ``j`` (``serve``): wait p50, p99, head age, new ends, backlog."""
    if not amt > 0.0:
        head = t - oldest if backlog > 0.0 else 0
        return head, head, head, oldest, newest, backlog
    first, end = (newest, oldest) if lifo else (oldest, newest)
    c50, c99, last_k = _walk(counts, newer, older, j, amt, lifo, first, end)
    emptied = counts[last_k, j] == 0.0  # unlink what was emptied; settle the backlog
    beyond = (older[last_k, j] if lifo else newer[last_k, j]) if emptied else last_k
    if lifo:
        newest = beyond
    else:
        oldest = beyond
    left = 0.0 if amt >= backlog else backlog - amt
    if left < DUST or (emptied and last_k == end) or left == 0.0:
        return t - c50, t - c99, 0, NONE, NONE, 0.0
    return t - c50, t - c99, t - oldest, oldest, newest, left


def _walk_py(
    counts: Any, newer: Any, older: Any, j: int, amt: float, lifo: bool, first: int, end: int
) -> tuple[int, int, int]:  # pragma: no cover
    """Take ``amt`` from ``first`` on towards ``end`` (``_take``): p50, p99 and last cohort."""
    share50, share99, slack = LIFO_SHARE if lifo else FIFO_SHARE
    lim50 = amt * share50 + slack
    lim99 = amt * share99 + slack
    w = counts[first, j]
    res = w - min(amt, w)
    counts[first, j] = 0.0 if res < DUST else res
    c50, c99, k = first, first, first
    if not (w < amt and first != end):
        return c50, c99, k
    before = w
    while True:
        k = older[k, j] if lifo else newer[k, j]
        if before < lim50:
            c50 = k
        if before < lim99:
            c99 = k
        w = counts[k, j]
        res = w - min(amt - before, w)
        counts[k, j] = 0.0 if res < DUST else res
        before += w
        if not (before < amt and k != end):
            return c50, c99, k


# The helpers first: a compiled function calls the compiled versions of the
# module's globals as they are when it is first compiled. They are inlined into
# the loop: as calls they cost a third more per queued lane and tick.
_age_out = compiled(_age_out_py, "always")
_enqueue = compiled(_enqueue_py, "always")
_walk = compiled(_walk_py, "always")
_serve = compiled(_serve_py, "always")
_loop: Callable[..., None] = compiled(_loop_py)


def warm_up() -> None:
    """Compile (or load) every loop here for the array layouts the sweep passes.

    Worker processes forked afterwards inherit the machine code instead of each
    compiling it; the results are the same either way.
    """
    ticks, lanes = 2, 1
    grid = np.zeros((ticks, lanes))
    llm_queue_loop(
        grid.copy(),
        tuple(np.zeros((ticks, lanes)) for _ in range(7)),
        (np.zeros((ticks, lanes), np.int16), np.zeros((ticks, lanes), np.int16)),
        (np.ones(lanes), np.ones((lanes, 17)), np.zeros((lanes, 4)), np.ones((5, lanes), np.int64)),
        (
            np.zeros((ticks, lanes)),
            np.zeros((ticks, lanes), np.int32),
            np.zeros((ticks, lanes), np.int32),
        ),
        1,
        True,
        0.5,
        0.1,
    )
    block = np.zeros((ticks, 2 * lanes))
    running_sum_rows(grid)
    rolling_rows(grid, 1)
    lane_sums(block[:, :lanes].T)  # a strided view, as the sweep's per-config columns are
    poisson_rows_sorted(np.ones(1), np.full(2, 0.5), np.arange(2), 3)
