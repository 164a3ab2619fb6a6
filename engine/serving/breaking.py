"""Where a model server breaks: its concurrency table, saturation, and the breaking rate.

Closed loop first (what serving benchmarks publish, and the answer to "how many
users"): ``N`` users each sending the next request when the last one ends, for
``N = 1, 2, 4, ...`` until more users add no throughput. The largest request
throughput seen is the saturation rate.

Then open loop (what a public service sees): Poisson arrivals at a rate, judged
by the failure rules (:mod:`backpressure.engine.serving.rules`). **The breaking
rate** is the lowest offered rate at which any rule fires, found by bisection
between a rate that holds and one that fails, and named by the rule that fired
there. All rates share one stream of arrival epochs (a unit-rate Poisson
process, scaled by ``1 / rate``), so a higher rate is the same arrivals, closer
together: the verdicts move with the load, not with sampling luck.

If the lowest rate tried already fails, the config *fails at any load*: no
rate is published. If a rate holds, the load is raised until something fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from backpressure.engine.rng import GOLDEN_GAMMA, MASK32, Mulberry32, draw_at
from backpressure.engine.serving.fused import (
    BOUND_S,
    BUSY_S,
    END_S,
    RUNNING_S,
    _summary,
    closed_run,
    open_run,
)
from backpressure.engine.serving.model import Server
from backpressure.engine.serving.rules import RULES, Limits, Verdict, verdict
from backpressure.engine.serving.run import Run
from backpressure.engine.serving.spec import requests_held
from backpressure.engine.sim.jit import COMPILED, compiled
from backpressure.engine.sim.libm import ln, ln_scalar

Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Search:
    """How the breaking rate is searched for, and how long each open-loop run lasts.

    A run at rate ``r`` measures ``measure_requests`` arrivals (at least
    ``min_measure_s`` seconds of them) after a warm-up of a quarter of that
    (between ``min_warmup_s`` and ``warmup_s``). At a low rate that is longer
    than the soak window, at a high one shorter: a percentile of fewer
    requests would move with the seed more than the rules' margins do.

    Attributes
    ----------
    measure_requests : int
        Measured arrivals of a run [-].
    probe_requests, probe_bracket : int, float
        The search first brackets the break with probe runs of
        ``probe_requests`` arrivals until its ends are within a factor
        ``probe_bracket``; only then do full runs decide it [-].
    min_measure_s, warmup_s, min_warmup_s : float
        Bounds on the measured part and on the warm-up [s].
    lowest_fraction : float
        The lowest rate tried, as a share of the saturation rate [-].
    tolerance : float
        The breaking rate is bisected (in the logarithm) until a rate that holds
        and one that fails are within this share of each other [-].
    max_raise : int
        How many times the load is doubled past saturation looking for a failure [-].
    max_users : int
        The concurrency table stops at this many users [-].
    """

    measure_requests: int = 1500
    probe_requests: int = 300
    probe_bracket: float = 1.3
    min_measure_s: float = 10.0
    warmup_s: float = 30.0
    min_warmup_s: float = 5.0
    lowest_fraction: float = 0.05
    tolerance: float = 0.02
    max_raise: int = 4
    max_users: int = 1024

    def window(self, rate: float, requests: int | None = None) -> tuple[float, float]:
        """``(start, end)`` of the measured arrivals of a run at ``rate`` [s].

        ``requests`` replaces ``measure_requests`` (a probe run measures fewer).
        """
        count = self.measure_requests if requests is None else requests
        measure = max(self.min_measure_s, count / rate)
        warmup = min(self.warmup_s, max(self.min_warmup_s, measure / 4))
        return warmup, warmup + measure


@dataclass(frozen=True, slots=True)
class Concurrency:
    """One closed-loop point: ``users`` in flight, as ``vllm bench serve`` reports them.

    Times in ms (means; TPOT is ``(e2e - ttft) / (output - 1)``), rates per second.
    """

    users: int
    ttft_ms: float
    tpot_ms: float
    itl_ms: float
    e2e_ms: float
    output_tokens_per_s: float
    requests_per_s: float
    running: float
    bound_s: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def tokens_per_s_per_user(self) -> float:
        """Decode speed one user sees: ``1000 / TPOT`` [tokens/s]."""
        return 1000.0 / self.tpot_ms if self.tpot_ms > 0 else math.inf


@dataclass(frozen=True, slots=True)
class Breaking:
    """The open-loop result of a server.

    ``rate`` is the breaking rate (None when the config fails at any load) and
    ``rule`` the rule that fired there (or at the lowest rate tried).
    ``rule_rates`` holds each rule's own breaking rate, interpolated between the
    runs on either side of it (None where no run crossed it). ``runs`` holds
    every run's verdict, by rate (probes included).
    """

    rate: float | None
    rule: str | None
    fails_at_any_load: bool
    bracket: tuple[float, float]
    rule_rates: dict[str, float | None]
    runs: tuple[Verdict, ...]


def epochs(seed: int, n: int) -> Array:
    """The first ``n`` arrival times of a unit-rate Poisson process [s].

    Exponential gaps ``-ln(1 - u)`` from the seeded stream, summed in order; the
    logarithm is the portable one (:func:`backpressure.engine.sim.libm.ln`), so
    the times are the same bits on every platform.
    """
    return Epochs(seed).upto(n)


class Epochs:
    """Arrival epochs of a unit-rate Poisson process, drawn as far as asked.

    Extending the stream continues the same generator and the same running sum,
    so the times are the same however they are asked for.
    """

    __slots__ = ("_last", "_state", "_times")

    def __init__(self, seed: int) -> None:
        self._state = seed & MASK32  # mulberry32's counter
        self._times = np.zeros(0)
        self._last = 0.0

    def upto(self, n: int) -> Array:
        """At least the first ``n`` epochs."""
        if self._times.size < n:
            more = max(n - self._times.size, self._times.size, 256)
            if COMPILED:
                # one compiled loop: every simulated server draws its own stream,
                # and numpy's whole-array steps cost more than the draws themselves
                ext = np.empty(more)
                self._state = _draw(self._state, self._last, ext)
            else:  # pragma: no cover - numba is a declared dependency
                ext = np.cumsum(np.concatenate(([self._last], gaps(self._state, more))))[1:]
                self._state = (self._state + more * GOLDEN_GAMMA) & MASK32
            self._times = np.concatenate((self._times, ext))
            self._last = float(self._times[-1])
        return self._times

    def until(self, t: float) -> Array:
        """Epochs that cover at least ``[0, t)``, with one beyond."""
        while self._times.size == 0 or self._times[-1] < t:
            self.upto(max(2 * self._times.size, 256))
        return self._times


def gaps(state: int, n: int) -> Array:
    """``n`` exponential gaps ``-ln(1 - u)`` from mulberry32 at counter ``state``, in numpy.

    The reference the compiled draw (:func:`_draw_py`) is tested against.
    """
    return -ln(1.0 - Mulberry32(state).block(n))


def _draw_py(state: int, last: float, out: Any) -> int:  # pragma: no cover - compiled
    """Epochs after ``last`` into ``out``, from mulberry32 at counter ``state``; the new counter.

    Step for step what :func:`gaps` and a running sum do (:mod:`backpressure.engine.rng`,
    :func:`backpressure.engine.sim.libm.ln`), one draw at a time: the same
    operations in the same order, so the same bits.
    """
    total = last
    for i in range(out.shape[0]):
        state = (state + GOLDEN_GAMMA) & MASK32
        total = total + -ln_scalar(1.0 - draw_at(state))
        out[i] = total
    return state


_draw = compiled(_draw_py)


def concurrency(run: Run, users: int) -> Concurrency:
    """A closed-loop run of ``users`` clients, in steady state.

    Latencies are means over the requests sent once the first wave (every
    prompt prefilled at once into an empty server) was answered and before the
    last ``users``, whose tail runs with fewer and fewer users left. With every
    user always waiting on one answer, each completes one request per mean
    latency, so the server completes ``users / e2e`` requests per second
    (Little's law for a closed loop). Counting answers in a time window
    instead would be skewed here: equal requests that start together finish
    in waves.
    """
    out = np.zeros(6)
    _summary(run.arrival, run.first, run.finish, run.status, run.output, users, out)
    return _point(users, out, run.running_s, run.busy_s, run.bound_s)


def _point(
    users: int,
    summary: Array,
    running_s: float,
    busy_s: float,
    bound_s: tuple[float, float, float],
) -> Concurrency:
    ttft, tpot, e2e, itl, tokens, done = summary[:6]
    rps = users / e2e if done > 0 and e2e > 0 else 0.0
    return Concurrency(
        users=users,
        ttft_ms=ttft * 1e3,
        tpot_ms=tpot * 1e3,
        itl_ms=itl * 1e3,
        e2e_ms=e2e * 1e3,
        output_tokens_per_s=rps * tokens,
        requests_per_s=rps,
        running=running_s / busy_s if busy_s > 0 else 0.0,
        bound_s=bound_s,
    )


def closed_loop_point(server: Server, users: int, prompt: int, output: int) -> Concurrency:
    """``users`` clients sending ``4 users + 16`` requests between them, summarised.

    What :func:`concurrency` of :func:`backpressure.engine.serving.run.closed_loop`
    gives, in one compiled call (:mod:`backpressure.engine.serving.fused`).
    """
    out = closed_run(server, users, 4 * users + 16, prompt, output)
    bound = (float(out[BOUND_S]), float(out[BOUND_S + 1]), float(out[BOUND_S + 2]))
    return _point(users, out, float(out[RUNNING_S]), float(out[BUSY_S]), bound)


def concurrency_table(
    server: Server,
    prompt: int,
    output: int,
    search: Search,
    single: Concurrency | None = None,
) -> tuple[Concurrency, ...]:
    """Closed-loop points for 1, 2, 4, ... users, and last as many as the server holds.

    Beyond the requests the server can hold at once (capped at
    ``search.max_users``), more users only wait in its queue. Each run sends
    ``4 N + 16`` requests (every user four or more), all starting at once, as
    ``--max-concurrency N`` does. ``single`` is this server's one-user point
    when it was run already (a run is a pure function of its inputs: the same point).
    """
    held = min(requests_held(server.scheduler, prompt, output), search.max_users)
    users = [1 << k for k in range(held.bit_length()) if 1 << k < held] + [held]
    return tuple(
        single if n == 1 and single is not None else closed_loop_point(server, n, prompt, output)
        for n in users
    )


def saturation_rps(table: Sequence[Concurrency]) -> float:
    """The most requests per second any closed-loop point completed [requests/s]."""
    return max(p.requests_per_s for p in table)


def open_loop(
    server: Server,
    times: Epochs,
    rate: float,
    prompt: int,
    output: int,
    limits: Limits,
    window: tuple[float, float],
    capacity_rps: float = math.inf,
) -> Verdict:
    """One run at ``rate`` arrivals/s over ``window`` (warm-up end, last arrival), judged.

    ``capacity_rps`` is the server's saturation rate (the soak rule fails above it).

    The run stops early once a rule's verdict cannot change: more requests lost,
    or slower to their first token than the budget, than the rule allows even if
    every other measured request were perfect.
    """
    start, end = window
    # serve() and judge() in one compiled call (engine/serving/fused.py)
    measure, occupancy = open_run(
        server,
        times.until(end * rate),
        rate,
        prompt,
        output,
        window,
        limits.quantile,
        limits.availability,
        limits.ttft_budget_s,
        limits.p99_slo_s,
    )
    return verdict(measure, occupancy, rate, limits, start, float(measure[END_S]), capacity_rps)


def find_breaking(
    server: Server,
    prompt: int,
    output: int,
    limits: Limits,
    search: Search,
    saturation: float,
    times: Epochs,
) -> Breaking:
    """The breaking rate of a server, by bisection around its saturation rate.

    Probe runs (``search.probe_requests`` arrivals) first bracket the break to
    within ``search.probe_bracket``; full runs then confirm both ends (moving
    them where a probe misled) and bisect to ``search.tolerance``. Only full
    runs decide the rate and the rules' own rates; the probes are kept with the
    runs for the chart, each verdict saying how many requests it measured.

    Parameters
    ----------
    server : Server
        The model server.
    prompt, output : int
        The request profile [tokens].
    limits : Limits
        The failure rules.
    search : Search
        Run length and search settings.
    saturation : float
        The closed-loop saturation rate [requests/s]: the search starts there,
        and the soak rule fails above it.
    times : Epochs
        The config's unit-rate arrival epochs.
    """
    s = _Runs(server, prompt, output, limits, search, saturation, times)
    floor = search.lowest_fraction * saturation
    low, high = s.bracket(floor)
    # Full runs confirm both ends, widening the bracket where a probe misled.
    while not s.at(low).passed and low > floor:
        high, low = low, max(floor, low / search.probe_bracket)
    if not s.at(low).passed:
        return s.result(None, s.at(low).rule, True, (low, low))
    top = saturation * 2.0**search.max_raise
    while s.at(high).passed and high < top:
        low, high = high, min(top, 2.0 * high)
    if s.at(high).passed:  # nothing fired at the highest load tried
        return s.result(None, None, False, (high, high))
    # Full runs bisect it (in the logarithm) to the tolerance.
    while high > low * (1.0 + search.tolerance):
        mid = math.sqrt(low * high)
        if s.at(mid).passed:
            low = mid
        else:
            high = mid
    if low <= saturation < high:
        # The soak rule fires at every rate above saturation, so the lowest rate
        # at which a rule fires is saturation itself (within the tolerance no
        # other rule is seen to fire below it).
        return s.result(saturation, "soak", False, (low, saturation))
    return s.result(high, s.at(high).rule, False, (low, high))


class _Runs:
    """The open-loop runs of one search, each run once: full runs and probes."""

    def __init__(
        self,
        server: Server,
        prompt: int,
        output: int,
        limits: Limits,
        search: Search,
        saturation: float,
        times: Epochs,
    ) -> None:
        self.server, self.prompt, self.output = server, prompt, output
        self.limits, self.search, self.saturation, self.times = limits, search, saturation, times
        self.runs: dict[float, Verdict] = {}
        self.probes: dict[float, Verdict] = {}

    def _run(self, rate: float, requests: int | None) -> Verdict:
        window = self.search.window(rate, requests)
        return open_loop(
            self.server,
            self.times,
            rate,
            self.prompt,
            self.output,
            self.limits,
            window,
            self.saturation,
        )

    def at(self, rate: float) -> Verdict:
        """The full run at ``rate``."""
        if rate not in self.runs:
            self.runs[rate] = self._run(rate, None)
        return self.runs[rate]

    def probe(self, rate: float) -> Verdict:
        """A probe run at ``rate`` (the full run where there is one)."""
        if rate in self.runs:
            return self.runs[rate]
        if rate not in self.probes:
            self.probes[rate] = self._run(rate, self.search.probe_requests)
        return self.probes[rate]

    def bracket(self, floor: float) -> tuple[float, float]:
        """Probes bracket the break: cheap, and far from it their verdicts are clear."""
        search = self.search
        low, high = floor, self.saturation
        if not self.probe(low).passed:
            return low, low
        raises = 0
        while self.probe(high).passed and raises < search.max_raise:
            low, high = high, 2.0 * high
            raises += 1
        while high > low * search.probe_bracket:
            mid = math.sqrt(low * high)
            if self.probe(mid).passed:
                low = mid
            else:
                high = mid
        return low, high

    def result(
        self, rate: float | None, rule: str | None, anyload: bool, bracket: tuple[float, float]
    ) -> Breaking:
        """The search's outcome; the rules' own rates come from full runs only."""
        rates = _rule_rates(self.runs)
        if rate is not None:
            # The breaking rate is the lowest at which any rule fires, so no rule's
            # own rate lies below it, and the rule that fired there breaks exactly at it.
            rates = {r: None if v is None else max(v, rate) for r, v in rates.items()}
            fired = self.runs[rate].fired if rate in self.runs else (rule or "",)
            for name in fired:
                rates[name] = rate
        shown = {**self.probes, **self.runs}  # a full run replaces the probe at its rate
        return Breaking(rate, rule, anyload, bracket, rates, _ordered(shown))


def _ordered(runs: dict[float, Verdict]) -> tuple[Verdict, ...]:
    return tuple(runs[r] for r in sorted(runs))


def _rule_rates(runs: dict[float, Verdict]) -> dict[str, float | None]:
    """Each rule's breaking rate: where its margin crosses 1 between adjacent runs.

    Between the highest run the rule held at below the lowest run it fired at,
    the crossing is interpolated linearly in margin against rate (no logarithms:
    the same bits everywhere).
    """
    ordered = _ordered(runs)
    out: dict[str, float | None] = {}
    for i, rule in enumerate(RULES):
        fired = [v for v in ordered if v.margins[i] > 1.0]
        if not fired:
            out[rule] = None
            continue
        first = fired[0]
        held = [v for v in ordered if v.rate < first.rate and v.margins[i] <= 1.0]
        if not held:
            out[rule] = first.rate
            continue
        last = held[-1]
        lo_m, hi_m = last.margins[i], first.margins[i]
        if not math.isfinite(hi_m) or hi_m <= lo_m:
            out[rule] = first.rate
            continue
        out[rule] = last.rate + (first.rate - last.rate) * (1.0 - lo_m) / (hi_m - lo_m)
    return out
