"""The search's runs in one compiled call each: inputs, serving loop and summary.

A breaking-rate search runs its server a few dozen times, closed loop and open
loop. Built in Python (the request arrays, the run's record, its summary) each
run cost about a third of its compiled loop again. These functions do the same
steps in the same order inside one compiled call, so the numbers are the same
bits as :func:`backpressure.engine.serving.run.serve` followed by
:func:`backpressure.engine.serving.rules.judge` or
:func:`backpressure.engine.serving.breaking.concurrency`
(tests/engine/serving/test_fused.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from backpressure.engine.serving import kernel
from backpressure.engine.serving.model import Server
from backpressure.engine.serving.rules import _measure
from backpressure.engine.serving.run import BIN_S, loop_args
from backpressure.engine.serving.step import expert_reads, pack
from backpressure.engine.sim.jit import compiled

Array = npt.NDArray[np.float64]

# out of a closed-loop run: its summary (_summary_py), then the run's sums
RUNNING_S, BUSY_S, BOUND_S = 6, 7, 8
CLOSED_FIELDS = BOUND_S + 3
# out of an open-loop run: the measure (rules._measure_py), then the judged window's end
END_S = 6
OPEN_FIELDS = END_S + 1


def _summary_py(
    arrival: Any, first: Any, finish: Any, status: Any, output: Any, users: int, out: Any
) -> None:  # pragma: no cover - compiled
    """Means of a closed-loop run's steady state into ``out``.

    In order: ttft, tpot, e2e [s], decode time per token [s], tokens per
    request, answers counted. Counted are the requests sent after the first
    wave and before the last ``users`` (the loop sends them in index order); a
    run too short to have any counts every answer.
    """
    n = arrival.shape[0]
    lo, hi = users, n - users
    if hi <= lo:
        lo, hi = 0, n
    done = 0
    ttft = 0.0
    tpot = 0.0
    e2e = 0.0
    decode_s = 0.0
    decode_tokens = 0.0
    tokens = 0.0
    for i in range(lo, hi):
        if status[i] != kernel.DONE:
            continue
        done += 1
        f = first[i] - arrival[i]
        e = finish[i] - arrival[i]
        ttft += f
        e2e += e
        tpot += (e - f) / max(output[i] - 1, 1)
        decode_s += e - f
        decode_tokens += output[i] - 1
        tokens += output[i]
    out[0] = ttft / max(done, 1)
    out[1] = tpot / max(done, 1)
    out[2] = e2e / max(done, 1)
    out[3] = decode_s / max(decode_tokens, 1.0)
    out[4] = tokens / max(done, 1)
    out[5] = done


_summary = compiled(_summary_py)


def _run_py(
    policy: int,
    kv_blocks: int,
    block_tokens: int,
    max_seqs: int,
    max_tokens: int,
    ubatch: int,
    slot_tokens: int,
    queue_depth: int,
    max_wait_s: float,
    cost: Any,
    experts: Any,
    users: int,
    requests: int,
    unit: Any,
    rate: float,
    start: float,
    end: float,
    prompt: int,
    output: int,
    quantile: float,
    availability: float,
    ttft_budget_s: float,
    p99_slo_s: float,
    out: Any,
) -> Any:  # pragma: no cover - compiled
    """A closed loop of ``users`` sending ``requests``, or with no users an open loop.

    Closed (:func:`backpressure.engine.serving.run.closed_loop`): like its
    benchmark client, the loop waits for every answer, with no queue limit and
    no timeout; ``out`` gets the summary (:func:`_summary_py`), then the run's
    running and busy time and the busy time by bound.

    Open (:func:`backpressure.engine.serving.breaking.open_loop`): ``unit``
    holds unit-rate arrival epochs past ``end * rate``; the run stops once the
    rules' verdict is settled; ``out`` gets what
    :func:`backpressure.engine.serving.rules._measure_py` measures, then the end
    of the window it measured. Returns the occupancy per second.
    """
    if users > 0:
        n = max(requests, users)
        arrival = np.zeros(n)
        queue_depth = n + 1
        max_wait_s = np.inf
        lost_limit = n + 1
        slow_limit = n + 1
        slow_s = np.inf
        bins = 1  # a closed loop's records span one second
    else:
        arrival = unit[: np.searchsorted(unit, end * rate)] / rate
        n = arrival.shape[0]
        measured = 0
        for i in range(n):
            if arrival[i] >= start:
                measured += 1
        warm = n - measured
        lost_limit = math.floor((1.0 - availability) * measured) + warm
        slow_limit = math.floor((1.0 - quantile) * measured) + warm
        slow_s = ttft_budget_s
        bins = max(1, math.ceil(max(end, arrival[n - 1] if n > 0 else 0.0, 1.0) / BIN_S))
    outputs = np.full(n, output, np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    status = np.zeros(n, np.int8)
    occupancy = np.zeros(bins)
    sums = np.zeros(8)
    stop = kernel.serve(
        policy,
        kv_blocks,
        block_tokens,
        max_seqs,
        max_tokens,
        ubatch,
        slot_tokens,
        queue_depth,
        max_wait_s,
        cost,
        experts,
        arrival,
        np.full(n, prompt, np.int64),
        outputs,
        users,
        np.inf,
        lost_limit,
        slow_limit,
        slow_s,
        BIN_S,
        first,
        finish,
        status,
        np.zeros(n, np.int32),
        occupancy,
        np.zeros(bins),
        np.zeros(4, np.int64),
        sums,
        False,
    )
    if users > 0:
        _summary(arrival, first, finish, status, outputs, users, out)
        out[RUNNING_S] = sums[0]
        out[BUSY_S] = sums[1]
        out[BOUND_S] = sums[4]
        out[BOUND_S + 1] = sums[5]
        out[BOUND_S + 2] = sums[6]
        return occupancy
    end_s = end
    if stop != kernel.DRAINED:
        end_s = max(start, min(end, sums[7]))
    _measure(arrival, first, finish, status, start, end_s, ttft_budget_s, p99_slo_s, quantile, out)
    out[END_S] = end_s
    return occupancy


_run = compiled(_run_py)
_NO_EPOCHS = np.zeros(0)


def closed_run(server: Server, users: int, requests: int, prompt: int, output: int) -> Array:
    """A closed loop of ``users`` clients sending ``requests``: :data:`CLOSED_FIELDS` numbers."""
    c = server.cost
    out = np.zeros(CLOSED_FIELDS)
    # the queue and timing arguments are unused by a closed loop: zeros of their types
    _run(
        *loop_args(server),
        0,
        0.0,
        pack(c),
        expert_reads(c, max(server.scheduler.max_batched_tokens, 1)),
        users,
        requests,
        _NO_EPOCHS,
        0.0,
        0.0,
        0.0,
        prompt,
        output,
        0.0,
        0.0,
        0.0,
        0.0,
        out,
    )
    return out


def open_run(
    server: Server,
    unit: Array,
    rate: float,
    prompt: int,
    output: int,
    window: tuple[float, float],
    quantile: float,
    availability: float,
    ttft_budget_s: float,
    p99_slo_s: float,
) -> tuple[Array, Array]:
    """An open-loop run, measured: :data:`OPEN_FIELDS` numbers and the occupancy per second."""
    c = server.cost
    out = np.zeros(OPEN_FIELDS)
    occupancy = _run(
        *loop_args(server),
        server.queue_depth,
        server.max_wait_s,
        pack(c),
        expert_reads(c, max(server.scheduler.max_batched_tokens, 1)),
        0,
        0,
        unit,
        rate,
        window[0],
        window[1],
        prompt,
        output,
        quantile,
        availability,
        ttft_budget_s,
        p99_slo_s,
        out,
    )
    return out, occupancy
