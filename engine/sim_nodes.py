"""One node's tick: admit, queue, serve; servers and LLM slots share the queue logic.

A tick runs in two halves so that ``block`` can push back within the same tick:
:func:`begin` ages out old work and states how much the node can take (its
*room*); then, upstream first, :func:`advance` admits the offered work, serves
what capacity (and any blocking child's room) allows and records the tick.

Outputs are written into preallocated ``(ticks, lanes)`` arrays, one per column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.queueing import DISCIPLINES, Cohorts, DisciplineRule, age_out, enqueue, serve
from engine.sim_model import TICK_S, NodeKind, NodeSpec, slot_time_s

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

COLUMNS = (
    "offered", "admitted", "served", "backlog", "dropped_shed", "dropped_aged",
    "refused_block", "lost", "utilization", "wait_p50_ticks", "wait_p99_ticks",
    "slot_time_s", "tokens_per_s",
)
RAW_ONLY = ("pressure", "inflight")  # recorded per tick, used to derive COLUMNS


@dataclass(slots=True)
class NodeRun:
    """Mutable state of one node during a run (state arrays are per lane)."""

    spec: NodeSpec
    rule: DisciplineRule
    fed_by_source: bool
    queue: Cohorts | None
    max_age_ticks: int | None
    cap: Array
    zeros: Array
    inflight: Array
    lifo: Mask
    room: Array
    pressure: Array
    blocked: Array
    aged: Array
    out: dict[str, Array]
    done: Array
    slot_s: Array


def new_run(spec: NodeSpec, lanes: int, ticks: int, fed_by_source: bool) -> NodeRun:
    """Fresh state for ``spec`` over ``lanes`` lanes and ``ticks`` ticks."""
    rule = DISCIPLINES[spec.discipline]
    holds = rule.holds and spec.max_depth > 0
    zeros = np.zeros(lanes)
    cap = np.full(lanes, spec.capacity_rps * TICK_S)
    max_age = None
    if rule.ages_out and spec.max_age_s is not None:
        max_age = int(spec.max_age_s / TICK_S + 1e-9)
    return NodeRun(
        spec=spec, rule=rule, fed_by_source=fed_by_source,
        queue=Cohorts.empty(lanes, ticks) if holds else None, max_age_ticks=max_age,
        cap=cap, zeros=zeros, inflight=zeros.copy(), lifo=np.zeros(lanes, dtype=bool),
        room=cap, pressure=zeros, blocked=zeros, aged=zeros,
        out={c: np.zeros((ticks, lanes)) for c in (*COLUMNS, *RAW_ONLY)}, done=zeros,
        slot_s=zeros,
    )


def begin(run: NodeRun, t: int) -> Array:
    """Start tick ``t``: drop over-age work, free finished LLM slots; return the room.

    Returns
    -------
    numpy.ndarray
        Work the node can accept this tick per lane [requests]: what it can start
        plus free queue space.
    """
    q, spec = run.queue, run.spec
    run.aged = run.zeros
    if q is not None and run.max_age_ticks is not None and q.busy:
        run.aged = age_out(q, t, run.max_age_ticks)
    run.pressure = run.zeros
    if spec.llm is not None:
        b = run.inflight
        run.slot_s = slot_time_s(spec.llm, b)
        run.done = np.minimum(b, b * TICK_S / run.slot_s)
        run.cap = spec.llm.slots - b + run.done
    run.room = run.cap if q is None else np.maximum(run.cap + spec.max_depth - q.backlog, 0.0)
    return run.room


def advance(run: NodeRun, t: int, offered: Array, limit: Array | None) -> Array:
    """Finish tick ``t``: admit ``offered``, serve, record; return work passed downstream.

    Parameters
    ----------
    run : NodeRun
        The node; changed in place.
    t : int
        Tick index.
    offered : numpy.ndarray
        Work arriving this tick per lane [requests].
    limit : numpy.ndarray or None
        The smallest room among blocking children: the node cannot pass on more.

    Returns
    -------
    numpy.ndarray
        Requests completed this tick per lane (LLM: generations finished). What a
        blocking child turned away is left in ``run.blocked``.
    """
    spec, q = run.spec, run.queue
    cap = run.cap if limit is None else np.minimum(run.cap, limit)
    backlog_before = run.zeros if q is None else q.backlog
    room = cap if q is None else np.maximum(cap + spec.max_depth - backlog_before, 0.0)
    admitted = np.minimum(offered, room)
    if q is None or (not q.busy and bool((admitted <= cap).all())):
        started, w50, w99 = admitted, run.zeros, run.zeros
        if q is not None:
            q.lo = t + 1
    else:
        enqueue(q, t, admitted)
        started = np.minimum(q.backlog, cap)
        w50, w99, head = serve(q, t, started, run.lifo)
        if spec.lifo:
            run.lifo = head * TICK_S > spec.lifo_after_s
    if limit is not None:
        run.blocked = np.minimum(backlog_before + offered, run.cap) - started
    return _record(run, t, offered, admitted, started, w50, w99)


def _record(run: NodeRun, t: int, offered: Array, admitted: Array, started: Array,
            w50: Array, w99: Array) -> Array:
    """Write the tick's raw columns; :func:`columns` derives the rest afterwards."""
    o, zeros = run.out, run.zeros
    o["offered"][t] = offered
    o["admitted"][t] = admitted
    if run.aged is not zeros:
        o["dropped_aged"][t] = run.aged
    if run.pressure is not zeros:
        o["pressure"][t] = run.pressure
    if run.queue is not None:
        o["backlog"][t] = run.queue.backlog
    if w50 is not zeros:
        o["wait_p50_ticks"][t] = w50
        o["wait_p99_ticks"][t] = w99
    if run.spec.llm is None:
        o["served"][t] = started
        return started
    run.inflight = run.inflight - run.done + started
    o["served"][t] = run.done
    o["inflight"][t] = run.inflight
    o["slot_time_s"][t] = run.slot_s
    return run.done


def quiet(run: NodeRun, t0: int, t1: int, offered: Array) -> None:
    """Ticks ``[t0, t1)`` of a server whose queue is empty and never overflows.

    Everything offered is served at once: exactly what :func:`advance` computes
    tick by tick in that case, written in one go. ``offered`` is ``(t1 - t0, lanes)``.
    """
    o = run.out
    o["offered"][t0:t1] = offered
    o["admitted"][t0:t1] = offered
    o["served"][t0:t1] = offered
    if run.queue is not None:
        run.queue.lo = t1


def shed_all(run: NodeRun, offered: Array) -> None:
    """A shed server with no blocking child, all ticks at once; ``offered`` is (ticks, lanes)."""
    cap = run.cap[None, :]
    served = np.minimum(offered, cap)
    o = run.out
    o["offered"][:] = offered
    o["admitted"][:] = served
    o["served"][:] = served


def columns(run: NodeRun) -> dict[str, Array]:
    """The run as ``(lanes, ticks)`` arrays keyed by :data:`COLUMNS`.

    Drops, refusals, losses, utilization and tokens/s follow from the raw columns
    elementwise, so they are computed here once instead of every tick.
    """
    o, spec = run.out, run.spec
    overflow = o["offered"] - o["admitted"]
    if run.rule.overflow == "refuse":
        o["refused_block"] = overflow + o["pressure"]
        o["lost"] = o["dropped_aged"] + overflow if run.fed_by_source else o["dropped_aged"]
    else:
        o["dropped_shed"] = overflow
        o["refused_block"] = o["pressure"]
        o["lost"] = o["dropped_aged"] + overflow
    if spec.llm is None:
        o["utilization"] = o["served"] / (spec.capacity_rps * TICK_S)
    else:
        o["utilization"] = o["inflight"] / spec.llm.slots
        o["tokens_per_s"] = o["served"] * (spec.llm.output_tokens / TICK_S)
    return {name: np.ascontiguousarray(o[name].T) for name in COLUMNS}


def is_stateless(run: NodeRun) -> bool:
    """A server that holds nothing between ticks."""
    return run.queue is None and run.spec.kind is NodeKind.SERVER
