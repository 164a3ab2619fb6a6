"""One config as a model server under load: concurrency table, saturation, breaking rate.

The catalog's settings become the engine's request profile, failure rules and
search (:class:`LoadSettings`); the costed config becomes a model server
(:func:`backpressure.engine.serving.spec.server`) whose runtime schedules it
(vLLM's paged blocks or llama.cpp's slots). Configs whose servers are the same
(a vLLM config's KV pool does not depend on the context it is swept at) are
simulated once: :func:`serving_key` names a server by its content, and the
arrival seed comes from that key.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from backpressure.catalog.loader import Catalog
from backpressure.engine.arch import ModelArch
from backpressure.engine.inputs import Constants, Device, Runtime, WeightFormat
from backpressure.engine.results import CapacityResult
from backpressure.engine.serving import kernel
from backpressure.engine.serving.breaking import (
    Breaking,
    Concurrency,
    Epochs,
    Search,
    concurrency,
    concurrency_table,
    find_breaking,
    open_loop,
    saturation_rps,
)
from backpressure.engine.serving.model import Policy, Server
from backpressure.engine.serving.rules import Limits, Verdict, judge
from backpressure.engine.serving.run import BIN_S, Run, serve
from backpressure.engine.serving.spec import requests_held, server

Array = npt.NDArray[np.float64]

TIMELINE_POINTS = 180  # the timeline chart shows at most this many seconds' points


@dataclass(frozen=True, slots=True)
class LoadSettings:
    """Request profile, failure rules and the search (catalog/settings.yaml)."""

    prompt_tokens: int
    output_tokens: int
    ttft_budget_ms: float
    p99_slo_ms: float
    availability: float
    soak_utilization: float
    soak_s: float
    measure_requests: int
    probe_requests: int
    probe_bracket: float
    min_measure_s: float
    warmup_s: float
    lowest_fraction: float
    tolerance: float
    max_raise: int
    max_users: int
    curve_fractions: tuple[float, ...]
    seed: int
    queue_depth_per_slot: float
    queue_max_age_s: float
    min_usable_tokens_per_s: float

    @classmethod
    def from_catalog(cls, cat: Catalog) -> LoadSettings:
        """Settings with the derived p99 SLO filled in."""
        s = cat.settings
        min_rate = cat.calibration["min_stream_tokens_per_s"].value
        p99 = s.p99_slo_ms or s.ttft_budget_ms + 1000.0 * s.output_tokens / min_rate
        return cls(
            s.prompt_tokens,
            s.output_tokens,
            s.ttft_budget_ms,
            p99,
            s.availability,
            s.soak_utilization,
            s.soak_seconds,
            s.measure_requests,
            s.probe_requests,
            s.probe_bracket,
            s.min_measure_seconds,
            s.warmup_seconds,
            s.load_min_fraction,
            s.breaking_tolerance,
            s.max_load_doublings,
            s.max_users,
            tuple(s.curve_fractions),
            s.seed,
            s.queue_depth_per_slot,
            s.queue_max_age_s,
            s.min_usable_tokens_per_s,
        )

    def limits(self) -> Limits:
        """The failure rules in the engine's units."""
        return Limits(
            self.ttft_budget_ms / 1e3,
            self.p99_slo_ms / 1e3,
            self.availability,
            self.soak_utilization,
            self.soak_s,
        )

    def search(self) -> Search:
        """How the breaking rate is searched for, and how long a run lasts."""
        return Search(
            measure_requests=self.measure_requests,
            probe_requests=self.probe_requests,
            probe_bracket=self.probe_bracket,
            min_measure_s=self.min_measure_s,
            warmup_s=self.warmup_s,
            min_warmup_s=min(5.0, self.warmup_s),
            lowest_fraction=self.lowest_fraction,
            tolerance=self.tolerance,
            max_raise=self.max_raise,
            max_users=self.max_users,
        )


@dataclass(frozen=True, slots=True)
class Serving:
    """What the sweep publishes about one model server under load.

    ``table`` is the closed-loop concurrency table; ``breaking`` the open-loop
    search, ``None`` when the config is too slow to use (its single stream is
    under the floor); ``curve`` the open-loop runs for the latency chart, by
    rate; ``timeline`` the per-second run at the breaking rate.
    """

    max_concurrency: int
    table: tuple[Concurrency, ...]
    saturation_rps: float
    bound: str
    breaking: Breaking | None
    curve: tuple[Verdict, ...]
    timeline: Timeline | None

    @property
    def single(self) -> Concurrency:
        """The closed-loop point with one user."""
        return self.table[0]

    @property
    def usable(self) -> bool:
        """Whether one stream decodes at least at the floor."""
        return self.breaking is not None

    @property
    def reached_concurrency(self) -> float:
        """Mean sequences running at the busiest closed-loop point [-]."""
        return max(p.running for p in self.table)


@dataclass(frozen=True, slots=True)
class Timeline:
    """One open-loop run, second by second: queue, occupancy, TTFT, lost requests."""

    rate: float
    seconds: tuple[float, ...]
    queue_depth: tuple[float, ...]
    occupancy: tuple[float, ...]
    ttft_p99_ms: tuple[float | None, ...]
    lost: tuple[float, ...]


def serving_key(srv: Server, s: LoadSettings) -> str:
    """A content hash of a server and the settings it is run under.

    A vLLM server's ``max_model_len`` matters only to refuse a request longer
    than it: any length that holds the profile's requests runs the same, so it
    is left out and configs that differ only in context share one simulation.
    """
    sched = srv.scheduler
    if sched.policy is Policy.VLLM:
        need = s.prompt_tokens + s.output_tokens
        sched = replace(sched, slot_tokens=need if sched.slot_tokens >= need else sched.slot_tokens)
    text = repr((replace(srv, scheduler=sched), s))
    return hashlib.sha256(text.encode()).hexdigest()


def seed_of(key: str, base: int) -> int:
    """The arrival seed of a simulation, from its key (content, never ``hash()``)."""
    return (int(key[:8], 16) ^ base) & 0xFFFFFFFF


def build_server(
    device: Device,
    runtime: Runtime,
    fmt: WeightFormat,
    constants: Constants,
    arch: ModelArch | None,
    cap: CapacityResult,
    s: LoadSettings,
) -> Server | None:
    """The model server of a costed config under the sweep's queue settings."""
    return server(
        device,
        runtime,
        fmt,
        constants,
        arch,
        cap,
        s.prompt_tokens,
        s.output_tokens,
        s.queue_depth_per_slot,
        s.queue_max_age_s,
    )


def simulate(srv: Server, s: LoadSettings, key: str) -> Serving:
    """Closed loop, then (when one stream is fast enough) the breaking-rate search."""
    search, limits = s.search(), s.limits()
    held = requests_held(srv.scheduler, s.prompt_tokens, s.output_tokens)
    # one user first: a server too slow for one reader needs no load table
    one = concurrency_table(srv, s.prompt_tokens, s.output_tokens, replace(search, max_users=1))
    if one[0].tokens_per_s_per_user < s.min_usable_tokens_per_s:
        return Serving(held, one, saturation_rps(one), _bound(srv, one, held), None, (), None)
    table = concurrency_table(srv, s.prompt_tokens, s.output_tokens, search, one[0])
    sat = saturation_rps(table)
    bound = _bound(srv, table, held)
    times = Epochs(seed_of(key, s.seed))
    breaking = find_breaking(srv, s.prompt_tokens, s.output_tokens, limits, search, sat, times)
    curve = _curve(srv, s, breaking, sat, times)
    at = breaking.rate if breaking.rate is not None else breaking.bracket[1]
    timeline = _timeline(srv, s, at, times)
    return Serving(held, table, sat, bound, breaking, curve, timeline)


def _curve(
    srv: Server, s: LoadSettings, b: Breaking, sat: float, times: Epochs
) -> tuple[Verdict, ...]:
    """The search's runs plus a few below the break, for the latency-against-load chart.

    A curve fraction whose rate the search already ran near (within the probe
    bracket's factor) adds no run.
    """
    anchor = b.rate if b.rate is not None else sat
    runs = {v.rate: v for v in b.runs}
    search, limits = s.search(), s.limits()
    near = search.probe_bracket**0.5
    for f in s.curve_fractions:
        rate = anchor * f
        if not any(rate / near <= r <= rate * near for r in runs):
            # a chart point: probe-length, its verdict says how many it measured
            window = search.window(rate, search.probe_requests)
            runs[rate] = open_loop(
                srv, times, rate, s.prompt_tokens, s.output_tokens, limits, window, sat
            )
    return tuple(runs[r] for r in sorted(runs))


def _timeline(srv: Server, s: LoadSettings, rate: float, times: Epochs) -> Timeline:
    """A probe-length run at ``rate``, second by second (thinned to :data:`TIMELINE_POINTS`).

    A chart of how the break sets in, so a probe's arrivals suffice; the
    verdicts come from the search's full runs.
    """
    search = s.search()
    duration = search.window(rate, search.probe_requests)[1]
    unit = times.until(duration * rate)
    arrival = unit[: np.searchsorted(unit, duration * rate)] / rate
    n = arrival.size
    run = serve(
        srv,
        arrival,
        np.full(n, s.prompt_tokens, np.int64),
        np.full(n, s.output_tokens, np.int64),
        seconds=duration,
    )
    return timeline(run, rate, duration)


def timeline(run: Run, rate: float, duration: float) -> Timeline:
    """Per-second series of a run: mean queue and occupancy, p99 TTFT and losses by arrival.

    Seconds are grouped ``step`` at a time so that at most :data:`TIMELINE_POINTS`
    points remain; a group's TTFT is the 99th percentile of the requests that
    arrived in it (None when one of them never got a first token).
    """
    bins = max(1, int(duration / BIN_S))
    step = max(1, math.ceil(bins / TIMELINE_POINTS))
    groups = -(-bins // step)
    # arrivals are in time order, so each group of seconds is one slice of requests
    edges = np.searchsorted(run.arrival, np.arange(groups + 1) * (BIN_S * step))
    edges[-1] = run.arrival.size
    ttft = np.where(np.isfinite(run.first), run.first - run.arrival, np.inf)
    # shed, abandoned or too long; a request still held at a stop is not lost (rules.py)
    lost_flags = (run.status != kernel.DONE) & (run.status != kernel.PENDING)
    # All groups at once (a loop of numpy calls per group cost more than the rest):
    # losses by differences of a running count, and each group's order statistic
    # from one sort by (group, TTFT), the same value a partition of the group picks.
    lo, hi = int(edges[0]), int(edges[-1])
    counts = np.diff(edges)
    lost_run = np.concatenate(([0], np.cumsum(lost_flags[lo:hi], dtype=np.int64)))
    lost_by = lost_run[edges[1:] - lo] - lost_run[edges[:-1] - lo]
    lost: list[float] = lost_by.astype(float).tolist()
    part = ttft[lo:hi]
    ranked = part[np.lexsort((part, np.repeat(np.arange(groups), counts)))]
    k = np.minimum(counts - 1, np.maximum(0, np.ceil(0.99 * counts).astype(np.int64) - 1))
    at = np.clip(edges[:-1] - lo + k, 0, max(hi - lo - 1, 0))  # empty groups: any index
    picked = ranked[at] if hi > lo else counts * 0.0
    p99: list[float | None] = [
        0.0 if c == 0 else (v * 1e3 if math.isfinite(v) else None)
        for c, v in zip(counts.tolist(), picked.tolist(), strict=True)
    ]
    pad = groups * step - bins

    def thin(a: Array) -> tuple[float, ...]:
        if step == 1:  # groups of one second: each mean is the value itself
            return tuple(a[:bins].tolist())
        full = np.concatenate([a[:bins], np.full(pad, np.nan)]) if pad else a[:bins]
        return tuple(np.nanmean(full.reshape(groups, step), axis=1).tolist())

    return Timeline(
        rate,
        tuple((np.arange(groups) * step * BIN_S).tolist()),
        thin(run.queued),
        thin(run.occupancy),
        tuple(p99),
        tuple(lost),
    )


def warm_up() -> None:
    """Compile (or load) the serving loop and the rules' summaries before worker processes fork."""
    Epochs(0).upto(4)
    from backpressure.engine.serving.model import Scheduler, StepCost

    cost = StepCost(1e9, 0.0, 0, 0, 1.0, 0.0, 0, 1e12, 2e9, 1e3, 1e14, 1e-4, 0.0)
    limits = Limits(1.5, 10.0, 0.999, 0.85, 120.0)
    for policy in (Policy.VLLM, Policy.LLAMA_CPP):
        srv = Server(Scheduler(policy, 64, 16, 4, 256, 256, 4096), cost, 8, 60.0)
        run = serve(srv, np.zeros(2), np.full(2, 8, np.int64), np.full(2, 4, np.int64), users=1)
        concurrency(run, 1)
        judge(run, 1.0, limits, 0.0, 1.0)


def _bound(srv: Server, table: tuple[Concurrency, ...], held: int) -> str:
    """What limits the server at saturation: ``kv``, ``seqs``, ``bandwidth``, ``compute``, ``host``.

    At the table's last point (the first to fill the server): if its running
    sequences sit at the limit, the limit binds (vLLM: KV blocks or
    ``max_num_seqs``, whichever is fewer; llama.cpp: slots); otherwise the part
    of the step that took the longest over the run does.
    """
    last = table[-1]
    sched = srv.scheduler
    if last.running >= 0.9 * held:
        if sched.policy is Policy.LLAMA_CPP:
            return "kv"
        return "seqs" if held == sched.max_seqs else "kv"
    memory, compute, host = last.bound_s
    parts = {"bandwidth": memory, "compute": compute, "host": host}
    return max(parts, key=lambda k: (parts[k], k))
