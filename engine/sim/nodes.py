"""One node's tick: admit, queue, serve; servers and LLM slots share the queue logic.

A tick runs in two halves so that ``block`` can push back within the same tick:
:func:`begin` ages out old work and states how much the node can take (its
*room*); then, upstream first, :func:`advance` admits the offered work, serves
what capacity (and any blocking child's room) allows and records the tick.

The numbers that differ between configs (capacity, queue depth, the LLM's slots
and step model) are per-lane arrays, so one run can hold several configs whose
graphs have the same shape; every step is elementwise across lanes, so a lane
computes exactly what it would alone.

Outputs are written into preallocated ``(ticks, lanes)`` arrays, only the ones a
node produces; :func:`columns` derives the rest per config afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.cohorts import Cohorts, age_out, enqueue, index_type, serve
from backpressure.engine.sim.model import TICK_S, LlmLanes, NodeKind, NodeSpec, llm_times
from backpressure.engine.sim.queueing import DISCIPLINES, DisciplineRule

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

COLUMNS = (
    "offered",
    "admitted",
    "served",
    "backlog",
    "dropped_shed",
    "dropped_aged",
    "refused_block",
    "lost",
    "utilization",
    "wait_p50_ticks",
    "wait_p99_ticks",
    "slot_time_s",
    "first_token_s",
    "tokens_per_s",
)
WAITS = ("wait_p50_ticks", "wait_p99_ticks")  # whole ticks, stored as small ints


@dataclass(slots=True)
class NodeRun:
    """Mutable state of one node during a run (state arrays are per lane).

    ``spec`` gives the node's shape (name, kind, discipline, max age, LIFO); its
    numbers come from the per-lane ``cap``, ``depth`` and ``llm``.
    """

    spec: NodeSpec
    rule: DisciplineRule
    fed_by_source: bool
    queue: Cohorts | None
    max_age_ticks: int | None
    cap: Array
    depth: Array
    llm: LlmLanes | None
    zeros: Array
    inflight: Array
    lifo: Mask
    room: Array
    pressure: Array
    blocked: Array
    aged: Array
    out: dict[str, npt.NDArray[Any]]
    done: Array
    slot_s: Array
    first_s: Array


class Scratch:
    """Memory for per-tick records, reused from one tick loop to the next.

    Each tick loop asks for its ``(ticks, lanes)`` record arrays by name and gets
    uninitialised views of buffers kept here, grown when too small. Passing one
    ``Scratch`` to successive runs saves allocating (and, on a VM, first touching)
    hundreds of megabytes per batch. Nothing here outlives a run's results: they
    are copied out of it. One ``Scratch`` serves one run at a time: two
    :func:`engine.sim.run.simulate_many` generators consumed side by side need two.
    """

    __slots__ = ("_buffers",)

    def __init__(self) -> None:
        self._buffers: dict[str, npt.NDArray[np.generic]] = {}

    def array(
        self, key: str, shape: tuple[int, ...], dtype: type[np.generic] = np.float64
    ) -> npt.NDArray[Any]:
        """An uninitialised C-contiguous array of ``shape`` whose memory is kept for ``key``."""
        size = int(np.prod(shape))
        buf = self._buffers.get(key)
        if buf is None or buf.dtype != dtype or buf.size < size:
            buf = np.empty(size, dtype=dtype)
            self._buffers[key] = buf
        return buf[:size].reshape(shape)


def new_run(
    nodes: Sequence[NodeSpec],
    lanes: Sequence[int],
    ticks: int,
    fed_by_source: bool,
    scratch: Scratch,
) -> NodeRun:
    """Fresh state for one node of several configs: ``nodes[i]`` over ``lanes[i]`` lanes.

    The nodes must have the same shape (see :func:`engine.sim.run.shape_of`). Record
    arrays come uninitialised from ``scratch``: every path writes every tick.
    """
    spec = nodes[0]
    rule = DISCIPLINES[spec.discipline]
    total = sum(lanes)
    holds = rule.holds and spec.max_depth > 0
    zeros = np.zeros(total)
    cap = np.repeat(np.array([n.capacity_rps * TICK_S for n in nodes]), lanes)
    max_age = None
    if rule.ages_out and spec.max_age_s is not None:
        max_age = int(spec.max_age_s / TICK_S + 1e-9)
    names = ["admitted", "served"]
    if holds:
        names += ["backlog", *WAITS] + (["dropped_aged"] if max_age is not None else [])
    if rule.overflow == "refuse" and not fed_by_source:
        names.append("pressure")
    if spec.llm is not None:
        names += ["inflight", "slot_time_s", "first_token_s"]
    wait = np.int16 if ticks <= np.iinfo(np.int16).max else np.int32  # ages fit exactly
    out = {
        c: scratch.array(f"{spec.name}/{c}", (ticks, total), wait if c in WAITS else np.float64)
        for c in names
    }
    queue = None
    if holds:
        queue = Cohorts.empty(
            total,
            ticks,
            scratch.array(f"{spec.name}/cohorts", (ticks, total)),
            scratch.array(f"{spec.name}/links", (2, ticks, total), index_type(ticks, total)),
        )
    return NodeRun(
        spec=spec,
        rule=rule,
        fed_by_source=fed_by_source,
        queue=queue,
        max_age_ticks=max_age,
        cap=cap,
        depth=np.repeat(np.array([float(n.max_depth) for n in nodes]), lanes),
        llm=LlmLanes.of([n.llm for n in nodes if n.llm is not None], lanes)
        if spec.llm is not None
        else None,
        zeros=zeros,
        inflight=zeros.copy(),
        lifo=np.zeros(total, dtype=bool),
        room=cap,
        pressure=zeros,
        blocked=zeros,
        aged=zeros,
        out=out,
        done=zeros,
        slot_s=zeros,
        first_s=zeros,
    )


def begin(run: NodeRun, t: int) -> Array:
    """Start tick ``t``: drop over-age work, free finished LLM slots; return the room.

    Returns
    -------
    numpy.ndarray
        Work the node can accept this tick per lane [requests]: what it can start
        plus free queue space.
    """
    q = run.queue
    run.aged = run.zeros
    if q is not None and run.max_age_ticks is not None and q.busy:
        run.aged = age_out(q, t, run.max_age_ticks)
    run.pressure = run.zeros
    if run.llm is not None:
        b = run.inflight
        run.slot_s, run.first_s = llm_times(run.llm, b)
        run.done = np.minimum(b, b * TICK_S / run.slot_s)
        run.cap = run.llm.slots - b + run.done
    run.room = run.cap if q is None else np.maximum(run.cap + run.depth - q.backlog, 0.0)
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
    backlog_before = run.zeros if q is None else q.backlog
    if limit is None:  # the room begin() stated
        cap, room = run.cap, run.room
    else:
        cap = np.minimum(run.cap, limit)
        room = cap if q is None else np.maximum(cap + run.depth - backlog_before, 0.0)
    admitted = np.minimum(offered, room)
    # A lane whose queue is empty and that can start everything it admits needs no
    # queue: through it the work would be enqueued and taken at once with no wait,
    # the same numbers. Only the other lanes join the queue this tick.
    queued = None if q is None else (backlog_before > 0.0) | (admitted > cap)
    if queued is None or not queued.any():
        started, w50, w99 = admitted, run.zeros, run.zeros
    else:
        assert q is not None
        enqueue(q, t, np.where(queued, admitted, 0.0))
        started = np.where(queued, np.minimum(q.backlog, cap), admitted)
        w50, w99, head = serve(q, t, np.where(queued, started, 0.0), run.lifo)
        if spec.lifo:
            run.lifo = np.where(queued, head * TICK_S > spec.lifo_after_s, run.lifo)
    if limit is not None:
        run.blocked = np.minimum(backlog_before + offered, run.cap) - started
    return _record(run, t, admitted, started, w50, w99)


def _record(run: NodeRun, t: int, admitted: Array, started: Array, w50: Array, w99: Array) -> Array:
    """Write the tick's raw columns (every one, every tick); :func:`columns` derives the rest."""
    o = run.out
    o["admitted"][t] = admitted
    if run.queue is not None:
        o["backlog"][t] = run.queue.backlog
        o["wait_p50_ticks"][t] = w50
        o["wait_p99_ticks"][t] = w99
        if run.max_age_ticks is not None:
            o["dropped_aged"][t] = run.aged
    if "pressure" in o:
        o["pressure"][t] = run.pressure
    if run.llm is None:
        o["served"][t] = started
        return started
    run.inflight = run.inflight - run.done + started
    o["served"][t] = run.done
    o["inflight"][t] = run.inflight
    o["slot_time_s"][t] = run.slot_s
    o["first_token_s"][t] = run.first_s
    return run.done


def quiet(run: NodeRun, t0: int, t1: int, offered: Array) -> None:
    """Ticks ``[t0, t1)`` of a server whose queue is empty and never overflows.

    Everything offered is served at once: exactly what :func:`advance` computes
    tick by tick in that case, written in one go. ``offered`` is ``(t1 - t0, lanes)``.
    """
    for name, column in run.out.items():
        if name in ("admitted", "served"):
            column[t0:t1] = offered
        elif name != "offered":
            column[t0:t1] = 0


def shed_all(run: NodeRun, offered: Array) -> None:
    """A shed server with no blocking child, all ticks at once; ``offered`` is (ticks, lanes)."""
    served = np.minimum(offered, run.cap[None, :])
    run.out["admitted"][:] = served
    run.out["served"][:] = served


@dataclass(frozen=True, slots=True)
class NodeLanes:
    """One node's numbers per lane, for turning its records into results.

    Each is an array of shape ``(lanes,)``: config ``i``'s number over its lanes.
    LLM numbers are zero for a server, and the other way round.
    """

    capacity_rps: Array
    service_s: Array
    slots: Array
    output_tokens: Array

    @classmethod
    def of(cls, nodes: Sequence[NodeSpec], lanes: Sequence[int]) -> NodeLanes:
        """Config ``i``'s node ``nodes[i]`` repeated over its ``lanes[i]`` lanes."""

        def col(values: list[float]) -> Array:
            return np.repeat(np.array(values, dtype=np.float64), lanes)

        llms = [n.llm for n in nodes]
        return cls(
            col([n.capacity_rps for n in nodes]),
            col([n.service_s for n in nodes]),
            col([m.slots if m is not None else 0 for m in llms]),
            col([m.output_tokens if m is not None else 0 for m in llms]),
        )


def columns(run: NodeRun, part: slice, p: NodeLanes) -> dict[str, Array]:
    """Lanes ``part`` of the run as ``(lanes, ticks)`` arrays keyed by :data:`COLUMNS`.

    ``p`` holds those lanes' numbers. Drops, refusals, losses, utilization and
    tokens/s follow from the raw columns elementwise, so they are computed here
    once instead of every tick; columns a node never wrote are zero. Every array
    is fresh (the records live in reused scratch memory) and stored time-major:
    what is returned is the transposed view, so that sums along ticks can add
    whole rows of lanes at once (:func:`engine.sim.rules.cumsum_ticks`).
    """
    raw = {name: col[:, part] for name, col in run.out.items()}  # (ticks, lanes) views
    shape = raw["admitted"].shape

    def copy(name: str) -> Array:
        return np.array(raw[name], dtype=np.float64) if name in raw else np.zeros(shape)

    c = {
        name: copy(name)
        for name in (
            "offered",
            "admitted",
            "served",
            "backlog",
            "dropped_aged",
            "slot_time_s",
            "first_token_s",
            *WAITS,
        )
    }
    c["tokens_per_s"] = np.zeros(shape)
    pressure = copy("pressure")
    overflow = c["offered"] - c["admitted"]
    if run.rule.overflow == "refuse":
        c["dropped_shed"] = np.zeros(shape)
        c["refused_block"] = overflow + pressure
        c["lost"] = c["dropped_aged"] + overflow if run.fed_by_source else c["dropped_aged"].copy()
    else:
        c["dropped_shed"] = overflow
        c["refused_block"] = pressure
        c["lost"] = c["dropped_aged"] + overflow
    if run.llm is None:
        c["utilization"] = c["served"] / (p.capacity_rps * TICK_S)
    else:
        c["utilization"] = raw["inflight"] / p.slots
        c["tokens_per_s"] = c["served"] * (p.output_tokens / TICK_S)
    return {name: c[name].T for name in COLUMNS}


def is_stateless(run: NodeRun) -> bool:
    """A server that holds nothing between ticks."""
    return run.queue is None and run.spec.kind is NodeKind.SERVER
