"""The tick loop: every node of every lane, tick by tick (SPEC §4).

Nodes joined by a ``block`` edge push back within a tick, so each such group
steps tick by tick together; every other node is computed on its own, in
topological order, from its parent's finished output: all ticks at once for a
node that holds nothing, and a lone queueing node skips its quiet stretches.
The lanes may belong to several configs of one shape (see
:func:`engine.sim.run.simulate_many`); each keeps its own numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.jit import COMPILED
from backpressure.engine.sim.kernel import llm_queue_loop
from backpressure.engine.sim.model import SOURCE, TICK_S, SimSpec
from backpressure.engine.sim.nodes import (
    NodeRun,
    Scratch,
    advance,
    begin,
    is_stateless,
    new_run,
    quiet,
    shed_all,
)
from backpressure.engine.sim.queueing import Discipline

Array = npt.NDArray[np.float64]


def run_lanes(
    specs: Sequence[SimSpec], lanes: Sequence[int], arrived: Array, scratch: Scratch
) -> dict[str, NodeRun]:
    """The tick loop over every lane of ``specs`` (config ``i`` has ``lanes[i]``).

    ``arrived`` is ``(ticks, lanes)``. Nodes joined by a ``block`` edge push back
    within a tick, so each such group steps tick by tick together; every other
    node is computed on its own, in topological order, from its parent's
    finished output.
    """
    spec = specs[0]
    ticks = arrived.shape[0]
    runs = {
        n.name: new_run([s.nodes[i] for s in specs], lanes, ticks, n.parent == SOURCE, scratch)
        for i, n in enumerate(spec.nodes)
    }
    for group in block_groups(spec):
        members = [runs[name] for name in group]
        for r in members:  # a node is offered what its parent serves, no copy
            parent = runs.get(r.spec.parent)
            r.out["offered"] = arrived if parent is None else parent.out["served"]
        offered = members[0].out["offered"]
        if len(members) == 1 and is_stateless(members[0]):
            shed_all(members[0], offered)
        elif len(members) == 1 and members[0].spec.llm is None:
            _run_server(members[0], offered)
        elif len(members) == 1 and compiled_llm(members[0]):
            _run_llm(members[0], offered, scratch)
        else:
            _run_group(spec, members, offered)
    return runs


def block_groups(spec: SimSpec) -> list[list[str]]:
    """Nodes connected through ``block`` edges, each group top node first."""
    group_of = {n.name: n.name for n in spec.nodes}
    for n in spec.nodes:  # topological order: a parent's group is settled first
        if n.discipline is Discipline.BLOCK and n.parent != SOURCE:
            group_of[n.name] = group_of[n.parent]
    groups: dict[str, list[str]] = {}
    for n in spec.nodes:
        groups.setdefault(group_of[n.name], []).append(n.name)
    return list(groups.values())


def _run_server(run: NodeRun, offered: Array) -> None:
    """A lone server: skip quiet stretches in one go, step through the rest."""
    ticks = offered.shape[0]
    overflow = np.flatnonzero((offered > run.cap[None, :]).any(axis=1))
    queue = run.queue
    t = 0
    while t < ticks:
        if queue is None or not queue.busy:
            k = int(np.searchsorted(overflow, t))
            nxt = int(overflow[k]) if k < overflow.size else ticks
            if nxt > t:
                quiet(run, t, nxt, offered[t:nxt])
                t = nxt
                continue
        begin(run, t)
        advance(run, t, offered[t], None)
        t += 1


def compiled_llm(run: NodeRun) -> bool:
    """Whether the compiled loop covers this lone node: an LLM with its own queue."""
    return COMPILED and run.llm is not None and run.queue is not None and "pressure" not in run.out


def _run_llm(run: NodeRun, offered: Array, scratch: Scratch) -> None:
    """A lone LLM node with a queue, every tick in the compiled loop."""
    o, llm, q = run.out, run.llm, run.queue
    assert llm is not None
    assert q is not None
    ticks, lanes = offered.shape
    aged = o["dropped_aged"] if "dropped_aged" in o else scratch.array("aged", (ticks, lanes))
    llm_queue_loop(
        np.ascontiguousarray(offered),
        (
            o["admitted"],
            o["served"],
            o["backlog"],
            aged,
            o["inflight"],
            o["slot_time_s"],
            o["first_token_s"],
        ),
        (o["wait_p50_ticks"], o["wait_p99_ticks"]),
        (run.depth, llm.costs, llm.experts, llm.ints),
        (q.counts, q.links[0], q.links[1]),
        -1 if run.max_age_ticks is None else run.max_age_ticks,
        run.spec.lifo,
        run.spec.lifo_after_s,
        TICK_S,
    )


def _run_group(spec: SimSpec, members: list[NodeRun], offered: Array) -> None:
    """Nodes that push back on each other, stepped tick by tick together."""
    by_name = {r.spec.name: r for r in members}
    plan = []
    for r in members:
        blocking = [
            by_name[c.name]
            for c in spec.children(r.spec.name)
            if c.name in by_name and c.discipline is Discipline.BLOCK
        ]
        parent = by_name.get(r.spec.parent)
        plan.append((r, parent, blocking))
    for t in range(offered.shape[0]):
        for r in members:
            begin(r, t)
        sent: dict[str, Array] = {}
        for r, parent, blocking in plan:
            fed = sent[parent.spec.name] if parent is not None else offered[t]
            out = advance(r, t, fed, _limit(blocking))
            sent[r.spec.name] = out
            for child in blocking:  # what each blocking child turned away
                child.pressure = np.clip(out + r.blocked - child.room, 0.0, r.blocked)


def _limit(blocking: list[NodeRun]) -> Array | None:
    """The smallest room among blocking children, or None without any."""
    if not blocking:
        return None
    room = blocking[0].room
    for child in blocking[1:]:
        room = np.minimum(room, child.room)
    return room
