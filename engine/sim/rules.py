"""After the tick loop: latency along the M/M/1 curve, error budget, failure rules.

Nothing here feeds back into the flows, so it runs once over whole
``(lanes, ticks)`` arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.jit import COMPILED
from backpressure.engine.sim.libm import LN2, LN100
from backpressure.engine.sim.model import SOURCE, TICK_S, NodeKind, NodeSpec, SimSpec
from backpressure.engine.sim.nodes import NodeLanes
from backpressure.engine.sim.queueing import mm1_factor
from backpressure.engine.sim.sums import rolling_rows, running_sum_rows

Array = npt.NDArray[np.float64]

RULES = ("ttft", "p99", "error_budget", "soak")  # tie-break order at one tick
NEVER = np.iinfo(np.int64).max
ANY_NODE = "*"  # the error budget is shared; who spent it is decided per lane


@dataclass(frozen=True, slots=True)
class Latency:
    """Per node ``(lanes, ticks)`` arrays derived from the flows [ms or -].

    ``*_rolled`` are the rolling means over the rules' window that the rules,
    the reports and the batch sweep judge (before any warm-up is blanked);
    ``util_cum`` and ``lost_cum`` (requests lost anywhere) are running sums kept
    so that no rule sums the same series twice.
    """

    rho: dict[str, Array]
    p50_ms: dict[str, Array]
    p99_ms: dict[str, Array]
    path_p99_ms: dict[str, Array]
    ttft_ms: dict[str, Array]
    budget_left: dict[str, Array]
    total_budget_left: Array
    p99_rolled: dict[str, Array]
    path_rolled: dict[str, Array]
    ttft_rolled: dict[str, Array]
    util_cum: dict[str, Array]
    lost_cum: Array


# Lanes from which a running sum along ticks is taken row by row (adding a row of
# lanes per tick, which vectorises) instead of lane by lane with np.cumsum (a
# chain of dependent adds, about three times slower per value).
ROW_SUM_LANES = 128


def cumsum_ticks(x: Array) -> Array:
    """``np.cumsum(x, axis=1)``, the same sums in the same order, faster on time-major data.

    ``x`` is ``(lanes, ticks)``. When it is the transposed view of a C-ordered
    ``(ticks, lanes)`` array with many lanes, the running sum is built one tick at
    a time over all lanes: ``c[t] = c[t - 1] + x[t]`` is exactly what np.cumsum
    computes for each lane, so the bits are identical.
    """
    xt = x.T
    if COMPILED and xt.flags.c_contiguous and xt.size:
        return running_sum_rows(xt).T
    if x.shape[0] < ROW_SUM_LANES or not xt.flags.c_contiguous:
        return np.cumsum(x, axis=1)
    out = np.empty_like(xt)
    out[0] = xt[0]
    for t in range(1, xt.shape[0]):
        np.add(out[t - 1], xt[t], out=out[t])
    return out.T


def rolling_mean(x: Array, window: int) -> Array:
    """Trailing mean over ``window`` ticks along axis 1 (fewer at the start)."""
    return rolling_from(cumsum_ticks(x), window)


def rolling_from(c: Array, window: int) -> Array:
    """:func:`rolling_mean` of the series whose running sum along axis 1 is ``c``."""
    if COMPILED and c.T.flags.c_contiguous and c.size:
        return rolling_rows(c.T, window).T
    out = np.empty_like(c)
    w = min(window, c.shape[1])
    out[:, :w] = c[:, :w] / np.arange(1, w + 1, dtype=np.float64)
    out[:, w:] = (c[:, w:] - c[:, :-w]) / float(window) if window < c.shape[1] else out[:, w:]
    return out


def latency(
    spec: SimSpec,
    flows: dict[str, dict[str, Array]],
    rates: Array,
    lanes: dict[str, NodeLanes] | None = None,
) -> Latency:
    """Latency quantiles, TTFT and error budget for every node.

    Parameters
    ----------
    spec : SimSpec
        The scenario (its rules and graph; numbers come from ``lanes``).
    flows : dict
        Per node the ``(lanes, ticks)`` columns of :func:`engine.sim.nodes.columns`.
    rates : numpy.ndarray
        Offered rate per lane and tick [requests/s].
    lanes : dict of NodeLanes, optional
        Per node, its numbers per lane (several configs may share one call);
        by default ``spec``'s, the same in every lane.

    Returns
    -------
    Latency
        Per node ``(lanes, ticks)`` arrays.

    Notes
    -----
    A server's own time in system at quantile q is its explicit queue wait plus
    ``S * F(rho) * -ln(1 - q)``: the M/M/1 sojourn time, exponential with mean
    ``S / (1 - rho)`` (:func:`engine.sim.queueing.mm1_factor`), with ``rho`` averaged
    over the rules' window. That term stands for queueing inside a tick, which
    the loop cannot see. An LLM's waiting is explicit (slots are tracked), so its
    time is queue wait plus the slot time at the current batch, and its TTFT the
    upstream path's p99, its own p99 wait and the time to its first token at the
    current batch (:mod:`engine.sim.llm`). Quantiles along a
    path are added, which overstates a path's p99 slightly (it is conservative).
    A top node's path adds nothing, so its arrays are shared, not copied (every
    value is >= 0, so ``x + 0.0`` is ``x`` bit for bit).
    """
    if lanes is None:
        lanes = {n.name: NodeLanes.of([n], [rates.shape[0]]) for n in spec.nodes}
    window = max(1, round(spec.rules.window_s / TICK_S))
    rho: dict[str, Array] = {}
    p50: dict[str, Array] = {}
    p99: dict[str, Array] = {}
    path: dict[str, Array] = {}
    ttft: dict[str, Array] = {}
    util_cum: dict[str, Array] = {}
    p99_r: dict[str, Array] = {}
    path_r: dict[str, Array] = {}
    ttft_r: dict[str, Array] = {}
    zeros = np.zeros_like(rates)
    for node in spec.nodes:
        f, p = flows[node.name], lanes[node.name]
        util_cum[node.name] = cumsum_ticks(f["utilization"])
        rho[node.name] = rolling_from(util_cum[node.name], window)
        w99 = f["wait_p99_ticks"] * TICK_S
        p50[node.name], p99[node.name] = _own_quantiles(node, f, w99, rho[node.name], p)
        p99_r[node.name] = rolling_mean(p99[node.name], window)
        up = path.get(node.parent)
        if up is None:
            path[node.name], path_r[node.name] = p99[node.name], p99_r[node.name]
        else:
            path[node.name] = p99[node.name] + up
            path_r[node.name] = rolling_mean(path[node.name], window)
        if node.llm is None:
            ttft[node.name], ttft_r[node.name] = zeros, zeros  # a rolling mean of zeros
        else:
            own = np.add(w99, f["first_token_s"], out=np.empty_like(w99))  # keeps the layout
            own *= 1000.0
            ttft[node.name] = own if up is None else up + own
            ttft_r[node.name] = rolling_mean(ttft[node.name], window)
    budget = (1.0 - spec.rules.availability) * cumsum_ticks(rates * TICK_S)[:, -1:]
    cum = {n.name: cumsum_ticks(flows[n.name]["lost"]) for n in spec.nodes}
    left = {name: _left(c, budget) for name, c in cum.items()}
    if len(spec.nodes) == 1:  # 0 + lost is lost: the total is the node's own
        lost_cum, total_left = next(iter(cum.values())), next(iter(left.values()))
    else:
        total = sum((flows[n.name]["lost"] for n in spec.nodes), np.zeros_like(rates))
        lost_cum = cumsum_ticks(total)
        total_left = _left(lost_cum, budget)
    return Latency(
        rho, p50, p99, path, ttft, left, total_left, p99_r, path_r, ttft_r, util_cum, lost_cum
    )


def _own_quantiles(
    node: NodeSpec, f: dict[str, Array], w99: Array, rho: Array, p: NodeLanes
) -> tuple[Array, Array]:
    w50 = f["wait_p50_ticks"] * TICK_S
    if node.kind is NodeKind.LLM:
        return (w50 + f["slot_time_s"]) * 1000.0, (w99 + f["slot_time_s"]) * 1000.0
    factor = mm1_factor(rho)
    sojourn = np.multiply(p.service_s[:, None], factor, out=np.empty_like(factor))
    return (w50 + sojourn * LN2) * 1000.0, (w99 + sojourn * LN100) * 1000.0


def _left(cum_lost: Array, budget: Array) -> Array:
    if bool((budget > 0.0).all()):
        return 1.0 - cum_lost / budget
    safe = np.where(budget > 0.0, budget, 1.0)
    return np.where(budget > 0.0, 1.0 - cum_lost / safe, np.where(cum_lost > 0.0, 0.0, 1.0))


def _first(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Index of the first True along axis 1 per lane, or NEVER."""
    hit = mask.any(axis=1)
    return np.where(hit, np.argmax(mask, axis=1), NEVER).astype(np.int64)


def rule_ticks(
    spec: SimSpec, flows: dict[str, dict[str, Array]], lat: Latency
) -> dict[tuple[str, str], npt.NDArray[np.int64]]:
    """First tick each (rule, node) fails, per lane (``NEVER`` when it holds)."""
    r = spec.rules
    window = max(1, round(r.window_s / TICK_S))
    out: dict[tuple[str, str], npt.NDArray[np.int64]] = {}
    for n in spec.nodes:  # every model server answers to the TTFT budget, leaf or not
        if n.kind is NodeKind.LLM:
            ttft = warmed(lat.ttft_rolled[n.name], window)
            out["ttft", n.name] = _first(ttft > r.ttft_budget_ms)
        elif r.p99_slo_ms is not None and not spec.children(n.name):
            out["p99", n.name] = _first(warmed(lat.path_rolled[n.name], window) > r.p99_slo_ms)
    spent = (lat.total_budget_left <= 0.0) & (lat.lost_cum > 0)
    out["error_budget", ANY_NODE] = _first(spent)  # the node is found per lane
    soak_w = round(r.soak_s / TICK_S)
    for n in spec.nodes:
        mean = np.round(rolling_from(lat.util_cum[n.name], soak_w), 6)
        mean[:, : soak_w - 1] = 0.0  # a soak needs the whole window
        out["soak", n.name] = _first(mean >= r.soak_utilization)
    return out


def judged(x: Array, window: int, warmup: int | None = None) -> Array:
    """Rolling mean over ``window``, zero until ``warmup`` ticks have passed.

    The warm-up defaults to one window: the M/M/1 curve is a steady-state result,
    and one tick is no evidence of a standing queue. Runs shorter than the warm-up
    are judged whole.
    """
    return warmed(rolling_mean(x, window), window if warmup is None else warmup, copy=False)


def warmed(rolled: Array, skip: int, copy: bool = True) -> Array:
    """``rolled`` (a rolling mean) with its first ``skip - 1`` ticks zeroed (see :func:`judged`)."""
    mean = rolled.copy() if copy else rolled
    if skip < mean.shape[1]:
        mean[:, : skip - 1] = 0.0
    return mean


def ancestors(spec: SimSpec, name: str) -> list[str]:
    """``name`` and every node above it, top first."""
    by_name = {n.name: n for n in spec.nodes}
    chain = []
    while name != SOURCE:
        chain.append(name)
        name = by_name[name].parent
    return chain[::-1]


def descendants(spec: SimSpec, name: str) -> list[str]:
    """``name`` and every node below it, in topological order."""
    keep = {name}
    for n in spec.nodes:
        if n.parent in keep:
            keep.add(n.name)
    return [n.name for n in spec.nodes if n.name in keep]
