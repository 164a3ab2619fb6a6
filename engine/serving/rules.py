"""The failure rules, judged on one open-loop run of a model server (SPEC §4).

A run offers Poisson arrivals at a rate; the requests that arrive in its
measured window (after a warm-up) are measured. Every measured request counts: one that
was shed, abandoned in the queue or never finished is a failure with an
infinite latency, so a percentile never improves because requests vanished
(goodput semantics). A run stopped early, once a rule's verdict was settled,
measures the requests that arrived before it stopped: the later ones never
reached the server, and the ones it still held are not lost, only unfinished
(no first token yet: an infinite TTFT; an infinite latency). The rules, in
their tie-break order:

``ttft``
    the 99th percentile of time to first token exceeds the TTFT budget;
``p99``
    the 99th percentile of end-to-end latency exceeds the p99 SLO;
``error_budget``
    more of the measured requests were lost than the error budget allows
    (``1 - availability``): the queue no longer absorbs the load and sheds it;
``soak``
    the server would not last a soak: the rationed resource (vLLM: KV blocks
    or ``max_num_seqs``; llama.cpp: slots) was held at the soak share or more
    on average over the measured window, or the offered rate exceeds the most
    the server completes at its fullest (its closed-loop saturation rate).
    Above that rate the queue grows without bound; a run can end before it
    shows (near saturation, vLLM's preemptions set in by chance, minutes into
    a run), a soak does not. The measured window holds a fixed count of
    arrivals (:class:`backpressure.engine.serving.breaking.Search`): at a low
    rate longer than the soak window, at a high one shorter; in a steady run
    the mean occupancy over either is the same.

A percentile ``p`` of ``n`` values exceeds a threshold exactly when more than
``floor((1 - p) n)`` of them do, so the rules are counts, not sorts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from backpressure.engine.serving.kernel import DONE, DRAINED, PENDING
from backpressure.engine.serving.run import BIN_S, Run
from backpressure.engine.sim.jit import compiled

Array = npt.NDArray[np.float64]

RULES = ("ttft", "p99", "error_budget", "soak")


@dataclass(frozen=True, slots=True)
class Limits:
    """The rules' thresholds.

    Attributes
    ----------
    ttft_budget_s, p99_slo_s : float
        TTFT budget and end-to-end p99 SLO [s].
    availability : float
        Share of requests that must be served; the rest is the error budget [-].
    soak_utilization : float
        Mean occupancy at which a soak fails [-].
    soak_s : float
        Soak window [s].
    """

    ttft_budget_s: float
    p99_slo_s: float
    availability: float
    soak_utilization: float
    soak_s: float

    @property
    def quantile(self) -> float:
        """The latency percentile the rules judge (the 99th) [-]."""
        return 0.99


@dataclass(frozen=True, slots=True)
class Verdict:
    """One run judged: which rules fired, and how close each came.

    ``margins`` holds, per rule, the judged value over its threshold (above 1:
    fired): the p99 TTFT over the budget, the p99 latency over the SLO, the
    lost share over the error budget, the mean occupancy over the soak share.
    """

    rate: float
    measured: int
    fired: tuple[str, ...]
    margins: tuple[float, ...]
    lost_share: float
    ttft_p50_s: float
    ttft_p99_s: float
    e2e_p99_s: float
    goodput_rps: float
    occupancy: float

    @property
    def passed(self) -> bool:
        """No rule fired."""
        return not self.fired

    @property
    def rule(self) -> str | None:
        """The first rule that fired in tie-break order, or None."""
        return self.fired[0] if self.fired else None


def _measure_py(
    arrival: Any,
    first: Any,
    finish: Any,
    status: Any,
    start: float,
    end: float,
    ttft_budget: float,
    slo: float,
    q: float,
    out: Any,
) -> None:  # pragma: no cover - compiled
    """The measured requests' counts and percentiles into ``out``.

    ``out`` = (measured, lost, ttft p50, ttft p99, e2e p99, good): a request with
    no first token has an infinite TTFT, one that did not finish an infinite
    latency; lost ones were shed, abandoned or too long (one still held when
    the run stopped is not); good ones finished within both the TTFT budget
    and the SLO.
    """
    n = arrival.shape[0]
    ttft = np.empty(n)
    e2e = np.empty(n)
    m = 0
    lost = 0
    good = 0
    for i in range(n):
        if arrival[i] < start or arrival[i] >= end:
            continue
        f = first[i] - arrival[i] if first[i] == first[i] else np.inf
        done = status[i] == DONE
        e = finish[i] - arrival[i] if done else np.inf
        if not done:
            if status[i] != PENDING:
                lost += 1
        elif f <= ttft_budget and e <= slo:
            good += 1
        ttft[m] = f
        e2e[m] = e
        m += 1
    out[0] = m
    out[1] = lost
    out[5] = good
    if m == 0:
        out[2] = np.inf
        out[3] = np.inf
        out[4] = np.inf
        return
    k50 = min(m - 1, max(0, int(np.ceil(0.5 * m)) - 1))
    k99 = min(m - 1, max(0, int(np.ceil(q * m)) - 1))
    sub = np.partition(ttft[:m], k50)
    out[2] = sub[k50]
    out[3] = np.partition(sub, k99)[k99]
    out[4] = np.partition(e2e[:m], k99)[k99]


_measure = compiled(_measure_py)


def judge(
    run: Run,
    rate: float,
    limits: Limits,
    start_s: float,
    end_s: float,
    capacity_rps: float = math.inf,
) -> Verdict:
    """Apply the rules to a run at ``rate`` arrivals/s measured from ``start_s`` to ``end_s``.

    ``capacity_rps`` is the server's saturation rate, for the soak rule.
    """
    q = limits.quantile
    out = np.zeros(6)
    if run.stop != DRAINED:
        end_s = max(start_s, min(end_s, run.stopped_s))
    _measure(
        run.arrival,
        run.first,
        run.finish,
        run.status,
        start_s,
        end_s,
        limits.ttft_budget_s,
        limits.p99_slo_s,
        q,
        out,
    )
    return verdict(out, run.occupancy, rate, limits, start_s, end_s, capacity_rps)


def verdict(
    measure: Array,
    occupancy_per_s: Array,
    rate: float,
    limits: Limits,
    start_s: float,
    end_s: float,
    capacity_rps: float = math.inf,
) -> Verdict:
    """The rules applied to what :func:`_measure_py` measured from ``start_s`` to ``end_s``.

    ``occupancy_per_s`` is the run's occupancy, second by second.
    """
    n, lost, ttft_p50, ttft_p99, e2e_p99, good = measure[:6]
    lost_share = lost / n if n else 0.0
    budget = 1.0 - limits.availability
    lo = int(start_s / BIN_S)
    hi = max(lo + 1, int(end_s / BIN_S))
    # np.mean's own steps (a pairwise sum, then one division) without its dispatch
    occupancy = (
        float(np.add.reduce(occupancy_per_s[lo:hi]) / occupancy_per_s[lo:hi].size)
        if occupancy_per_s.size > lo
        else 0.0
    )
    margins = (
        ttft_p99 / limits.ttft_budget_s,
        e2e_p99 / limits.p99_slo_s,
        lost_share / budget if budget > 0 else (math.inf if lost else 0.0),
        max(occupancy / limits.soak_utilization, rate / capacity_rps),
    )
    fired = tuple(r for r, m in zip(RULES, margins, strict=True) if m > 1.0)
    span = max(end_s - start_s, 1e-9)
    return Verdict(
        rate,
        int(n),
        fired,
        margins,
        lost_share,
        float(ttft_p50),
        float(ttft_p99),
        float(e2e_p99),
        float(good) / span,
        occupancy,
    )
