"""The one-call runs of the search give the same bits as the Python steps they replace."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from backpressure.engine.serving.breaking import (
    Epochs,
    Search,
    closed_loop_point,
    concurrency,
    open_loop,
)
from backpressure.engine.serving.rules import Limits, judge
from backpressure.engine.serving.run import closed_loop, serve
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.serving.test_mechanics import COST, llama, vllm

LIMITS = Limits(1.5, 20.0, 0.999, 0.85, 120.0)
SEARCH = Search()
# a MoE step cost, whose expert table differs from a dense model's
MOE = replace(COST, expert_bytes=2e7, num_experts=64, experts_per_token=4)


def _python_open_loop(srv, times, rate, prompt, output, limits, window, capacity):
    """open_loop as it was written before its run and judgement became one call."""
    start, end = window
    unit = times.until(end * rate)
    arrival = unit[: np.searchsorted(unit, end * rate)] / rate
    n = arrival.size
    measured = int(np.count_nonzero(arrival >= start))
    warm = n - measured
    allowed = math.floor((1.0 - limits.quantile) * measured)
    budget = math.floor((1.0 - limits.availability) * measured)
    run = serve(
        srv,
        arrival,
        np.full(n, prompt, np.int64),
        np.full(n, output, np.int64),
        lost_limit=budget + warm,
        slow_limit=allowed + warm,
        slow_s=limits.ttft_budget_s,
        seconds=end,
    )
    return judge(run, rate, limits, start, end, capacity)


SERVERS = {
    "vllm": vllm(depth=256, wait=30.0),
    "vllm-small-pool": vllm(blocks=300, seqs=64, depth=64, wait=10.0),
    "vllm-moe": vllm(cost=MOE, depth=512, wait=60.0),
    "llama": llama(8, 4096, depth=32, wait=20.0),
    "llama-moe": llama(4, 8192, cost=MOE),
}


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(SERVERS)),
    rate=st.floats(0.05, 200.0),
    probe=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_an_open_loop_run_is_the_python_steps_bit_for_bit(name, rate, probe, seed):
    # From far below saturation to far above it: drained runs, and runs stopped
    # early by their losses or their slow first tokens.
    srv = SERVERS[name]
    window = SEARCH.window(rate, SEARCH.probe_requests if probe else None)
    got = open_loop(srv, Epochs(seed), rate, 1024, 128, LIMITS, window, 3.0)
    want = _python_open_loop(srv, Epochs(seed), rate, 1024, 128, LIMITS, window, 3.0)
    assert got == want


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(SERVERS)), users=st.integers(1, 96))
def test_a_closed_loop_point_is_the_python_steps_bit_for_bit(name, users):
    srv = SERVERS[name]
    want = concurrency(closed_loop(srv, users, 4 * users + 16, 1024, 128), users)
    assert closed_loop_point(srv, users, 1024, 128) == want


def test_the_comparison_can_fail():
    # The equality above is on every field: a run one request longer differs.
    srv = SERVERS["vllm"]
    one = closed_loop_point(srv, 8, 1024, 128)
    other = concurrency(closed_loop(srv, 8, 4 * 8 + 17, 1024, 128), 8)
    assert one != other
