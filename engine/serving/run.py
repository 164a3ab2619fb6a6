"""Run a server under load: open loop (arrivals at given times) or closed loop (N users).

Both go through one loop (:func:`backpressure.engine.serving.kernel.serve`); a
closed loop is the same loop in which each request's arrival is the moment its
user's previous request finished.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from backpressure.engine.serving import kernel
from backpressure.engine.serving.model import Server
from backpressure.engine.serving.step import expert_reads, pack

Array = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

BIN_S = 1.0  # occupancy and queue depth are kept per simulated second


@dataclass(frozen=True)
class Run:
    """What one run did, request by request and second by second.

    ``first`` and ``finish`` are NaN for requests that never got there;
    ``status`` holds each request's fate (``kernel.DONE``, ``SHED``,
    ``ABANDONED``, ``TOO_LONG`` or ``PENDING``). ``occupancy[k]`` is the mean
    share of the rationed resource (vLLM: KV blocks or ``max_num_seqs``, whichever
    is fuller; llama.cpp: slots) held during second ``k``, ``queued[k]`` the mean
    waiting requests. ``busy_s`` is the time the server ran steps and
    ``running_s`` the integral of running sequences over it; ``bound_s`` splits
    ``busy_s`` by what set each step's time (memory, compute, host).
    ``stopped_s`` is the simulated time the run ended: a run stopped early
    (``stop`` not ``kernel.DRAINED``) never saw the arrivals after it.
    """

    arrival: Array
    first: Array
    finish: Array
    status: npt.NDArray[np.int8]
    preempts: npt.NDArray[np.int32]
    prompt: Ints
    output: Ints
    occupancy: Array
    queued: Array
    steps: int
    preemptions: int
    stop: int
    busy_s: float
    running_s: float
    decode_tokens: float
    prefill_tokens: float
    bound_s: tuple[float, float, float]
    stopped_s: float = math.inf


def _bins(seconds: float) -> int:
    return max(1, math.ceil(seconds / BIN_S))


def loop_args(server: Server) -> tuple[int, int, int, int, int, int, int]:
    """The scheduler as the serving loop takes it: its first seven arguments."""
    s = server.scheduler
    return (
        int(s.policy),
        s.kv_blocks,
        max(s.block_tokens, 1),
        s.max_seqs,
        s.max_batched_tokens,
        max(s.ubatch_tokens, 1),
        s.slot_tokens,
    )


def serve(
    server: Server,
    arrival: Array,
    prompt: Ints,
    output: Ints,
    users: int = 0,
    stop_s: float = math.inf,
    lost_limit: int | None = None,
    slow_limit: int | None = None,
    slow_s: float = math.inf,
    seconds: float = 0.0,
    step_by_step: bool = False,
) -> Run:
    """One run of ``server`` over the requests given.

    Parameters
    ----------
    server : Server
        Scheduler, step cost and queue rules.
    arrival : numpy.ndarray
        Open loop: arrival times, ascending [s]. Closed loop: ignored (overwritten).
    prompt, output : numpy.ndarray
        Tokens per request [tokens].
    users : int
        0 for an open loop; else the closed loop's concurrency [-].
    stop_s : float
        Stop stepping past this time; requests still held stay PENDING [s].
    lost_limit, slow_limit : int or None
        Stop early once more requests than this were lost (shed, abandoned), or
        got their first token later than ``slow_s`` [-]: the verdict is settled.
    seconds : float
        Span of the per-second records [s]; at least the last arrival.
    step_by_step : bool
        Run every llama.cpp step one by one instead of summing quiet stretches
        in closed form (the reference the shortcut is tested against).
    """
    s = server.scheduler
    c = server.cost
    n = int(arrival.shape[0])
    arr = np.array(arrival, dtype=np.float64)
    prompt = np.asarray(prompt, np.int64)
    output = np.asarray(output, np.int64)
    span = max(seconds, float(arr[-1]) if n and users == 0 else 0.0, 1.0)
    bins = _bins(span)
    first = np.empty(n)
    first.fill(np.nan)
    finish = first.copy()
    status = np.zeros(n, np.int8)
    preempts = np.zeros(n, np.int32)
    occupancy = np.zeros(bins)
    queued = np.zeros(bins)
    counters = np.zeros(4, np.int64)
    sums = np.zeros(8)
    stop = kernel.serve(
        *loop_args(server),
        server.queue_depth,
        server.max_wait_s,
        pack(c),
        expert_reads(c, max(s.max_batched_tokens, 1)),
        arr,
        prompt,
        output,
        users,
        stop_s,
        n + 1 if lost_limit is None else lost_limit,
        n + 1 if slow_limit is None else slow_limit,
        slow_s,
        BIN_S,
        first,
        finish,
        status,
        preempts,
        occupancy,
        queued,
        counters,
        sums,
        step_by_step,
    )
    return Run(
        arr,
        first,
        finish,
        status,
        preempts,
        prompt,
        output,
        # per second: a division by a bin of one second is the identity
        occupancy if BIN_S == 1.0 else occupancy / BIN_S,
        queued if BIN_S == 1.0 else queued / BIN_S,
        int(counters[0]),
        int(counters[1]),
        int(stop),
        float(sums[1]),
        float(sums[0]),
        float(sums[2]),
        float(sums[3]),
        (float(sums[4]), float(sums[5]), float(sums[6])),
        float(sums[7]),
    )


def closed_loop(server: Server, users: int, requests: int, prompt: int, output: int) -> Run:
    """``users`` clients each sending the next request as soon as the last one finished.

    This is what ``vllm bench serve --max-concurrency N --request-rate inf``
    does: ``requests`` prompts, at most ``users`` in flight, all starting at once;
    like its client, the loop waits for every answer (no queue limit, no timeout).
    """
    n = max(requests, users)
    patient = Server(server.scheduler, server.cost, n + 1, math.inf)  # replace() cost more
    return serve(
        patient,
        np.zeros(n),
        np.full(n, prompt, np.int64),
        np.full(n, output, np.int64),
        users=users,
    )
