"""The serving engine's mechanics: what each scheduler does, shown on small servers."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from backpressure.engine.serving import kernel
from backpressure.engine.serving.breaking import (
    Epochs,
    Search,
    _draw_py,
    concurrency_table,
    find_breaking,
    gaps,
    open_loop,
    saturation_rps,
)
from backpressure.engine.serving.model import Policy, Scheduler, Server, StepCost
from backpressure.engine.serving.rules import Limits
from backpressure.engine.serving.run import closed_loop, serve
from backpressure.engine.serving.step import pack, step_time
from backpressure.engine.sim.libm import _ln_scalar_py, ln
from hypothesis import given, settings
from hypothesis import strategies as st

MS = 1e-3

# An 8B-class model on a 24 GB card, in round numbers: 16 GB of weights read at
# 800 GB/s (20 ms a pass), 128 KiB of KV per token, 100 TFLOP/s.
COST = StepCost(
    weight_bytes=16e9,
    expert_bytes=0.0,
    num_experts=0,
    experts_per_token=0,
    kv_read_bytes_per_token=131072.0,
    window_read_bytes_per_token=0.0,
    window=0,
    bandwidth_bytes_per_s=800e9,
    flops_per_token=16e9,
    attn_flops_per_pair=4 * 32 * 32 * 128,
    flops_per_s=100e12,
    pass_overhead_s=0.001,
    step_overhead_s=0.0,
)


def vllm(
    blocks: int = 4096,
    seqs: int = 256,
    budget: int = 2048,
    cost: StepCost = COST,
    depth: int = 10_000,
    wait: float = math.inf,
) -> Server:
    return Server(
        Scheduler(Policy.VLLM, blocks, 16, seqs, budget, budget, 32768), cost, depth, wait
    )


def llama(
    slots: int, ctx: int, cost: StepCost = COST, depth: int = 10_000, wait: float = math.inf
) -> Server:
    return Server(Scheduler(Policy.LLAMA_CPP, 0, 1, slots, 2048, 512, ctx), cost, depth, wait)


def requests(n: int, prompt: int, output: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, prompt, np.int64), np.full(n, output, np.int64)


def test_one_request_takes_a_prefill_step_then_output_minus_one_decode_steps():
    p, o = requests(1, 1000, 10)
    run = serve(vllm(), np.zeros(1), p, o)
    c = pack(COST)
    prefill = step_time(c, np.zeros(2049), 0, 0.0, 1000, 0.0, 1000 * 1001 / 2, 1, 1)
    assert run.first[0] == pytest.approx(prefill)
    decode = sum(
        step_time(c, np.zeros(2049), 1, 1000.0 + k + 1, 0, 0.0, 0.0, 1, 1) for k in range(9)
    )
    assert run.finish[0] - run.first[0] == pytest.approx(decode)
    assert run.status[0] == kernel.DONE
    assert run.steps == 10


def test_a_burst_reaches_the_scheduler_together_once_the_front_end_took_it_in():
    # 200 requests at once through a front end that needs 5 ms of work for each
    # and shares its time among them: none reaches the scheduler before all 200
    # are taken in, so no first token comes before 1 s.
    intake = 5 * MS
    server = vllm(cost=replace(COST, request_overhead_s=intake))
    run = closed_loop(server, 200, 200, 100, 8)
    assert np.min(run.first) >= 200 * intake - 1e-9
    # one request alone pays its own intake once
    alone = closed_loop(server, 1, 1, 100, 8)
    free = closed_loop(vllm(), 1, 1, 100, 8)
    assert alone.first[0] == pytest.approx(free.first[0] + intake)


def test_requests_far_apart_each_pay_only_their_own_intake():
    # Arrivals 1 s apart never share the front end: each first token comes its
    # intake later than without one.
    intake = 5 * MS
    fronted = vllm(cost=replace(COST, request_overhead_s=intake))
    arrival = np.arange(20) * 1.0
    slow = serve(fronted, arrival, *requests(20, 300, 8))
    fast = serve(vllm(), arrival, *requests(20, 300, 8))
    assert np.allclose(slow.first - fast.first, intake, rtol=0, atol=1e-9)
    # two together share it: both leave it after twice the work
    pair = serve(fronted, np.zeros(2), *requests(2, 300, 8))
    alone = serve(vllm(), np.zeros(2), *requests(2, 300, 8))
    assert np.all(pair.first >= 2 * intake)
    assert pair.first[0] == pytest.approx(alone.first[0] + 2 * intake)


def test_paged_admission_holds_more_short_requests_than_full_context_slots():
    # One pool of 65,536 KV tokens. llama.cpp reserves a slot's full 8k context per
    # request: 8 at once. vLLM admits a 1,024 + 128 token request by the blocks it
    # holds, so dozens run at once, and the closed loop gets more done.
    tokens = 65_536
    p, o = requests(256, 1024, 128)
    paged = closed_loop(vllm(blocks=tokens // 16), 64, 256, 1024, 128)
    slots = closed_loop(llama(slots=tokens // 8192, ctx=8192), 64, 256, 1024, 128)
    assert slots.running_s / slots.busy_s <= 8.0 + 1e-9
    assert paged.running_s / paged.busy_s > 4 * slots.running_s / slots.busy_s
    done_per_s = [np.sum(r.status == kernel.DONE) / np.max(r.finish) for r in (paged, slots)]
    assert done_per_s[0] > 2 * done_per_s[1]
    del p, o


def test_a_long_prompt_delays_the_first_token_of_the_requests_behind_it():
    # Chunked prefill: a 16k prompt arriving first eats the token budget of the
    # steps it spans, so the short prompts that arrive just after wait for it.
    arrival = np.array([0.0, 0.001, 0.002, 0.003])
    short = serve(vllm(), arrival[1:], *requests(3, 200, 16))
    p = np.array([16_000, 200, 200, 200], np.int64)
    o = np.full(4, 16, np.int64)
    behind = serve(vllm(), arrival, p, o)
    alone = short.first - short.arrival
    delayed = behind.first[1:] - behind.arrival[1:]
    assert np.all(delayed > alone + 0.05)


def test_preemption_appears_when_blocks_run_out_and_never_with_room():
    tight = closed_loop(vllm(blocks=200), 16, 64, 512, 256)  # 16 x 48 blocks > 200
    roomy = closed_loop(vllm(blocks=20_000), 16, 64, 512, 256)
    assert tight.preemptions > 0
    assert roomy.preemptions == 0
    assert np.all(tight.status == kernel.DONE)  # preempted requests recompute and finish
    assert tight.preempts.sum() == tight.preemptions
    assert np.max(tight.finish) > np.max(roomy.finish)


def test_a_preempted_request_finds_its_cached_blocks_again():
    # vLLM's prefix cache keeps a preempted request's full blocks until the free queue
    # hands them out: on its return it recomputes what was overwritten, not its whole
    # prompt. Without the cache every preemption would cost its prompt again.
    run = closed_loop(vllm(blocks=200), 16, 64, 512, 256)
    assert run.preemptions > 0
    prompts = float(run.prompt.sum())
    recomputed = run.prefill_tokens - prompts
    assert recomputed >= 0
    # Without the cache each preemption recomputes at least its 512-token prompt;
    # this pool is so tight that other requests take many of the blocks back first.
    assert recomputed < 0.75 * run.preemptions * 512


@pytest.mark.parametrize("server", [vllm(), llama(slots=24, ctx=4096)], ids=["vllm", "llama.cpp"])
def test_closed_loop_throughput_agrees_with_littles_law(server):
    # N users always have one request in flight: N = throughput x mean latency.
    for users in (1, 4, 16, 64):
        run = closed_loop(server, users, 12 * users + 32, 1024, 128)
        done = run.status == kernel.DONE
        span = np.max(run.finish)
        throughput = done.sum() / span
        latency = np.mean(run.finish[done] - run.arrival[done])
        assert throughput * latency == pytest.approx(users, rel=0.1), users


def test_the_sequence_limit_caps_what_runs():
    run = closed_loop(vllm(seqs=8), 32, 128, 256, 64)
    assert run.running_s / run.busy_s <= 8 + 1e-9


def test_a_full_queue_sheds_and_an_old_request_is_abandoned():
    arrival = np.zeros(50)
    run = serve(vllm(seqs=1, depth=5, wait=0.5), arrival, *requests(50, 500, 200))
    # all fifty arrive before the first step: five find room in the queue, the rest are shed
    assert np.sum(run.status == kernel.SHED) == 45
    aged = serve(vllm(seqs=1, wait=0.5), arrival[:10], *requests(10, 500, 200))
    assert np.sum(aged.status == kernel.ABANDONED) > 0


def test_a_request_no_pool_holds_is_refused_not_hung():
    run = serve(vllm(blocks=10), np.zeros(2), *requests(2, 1000, 10))
    assert np.all(run.status == kernel.TOO_LONG)
    slot = serve(llama(slots=2, ctx=512), np.zeros(1), *requests(1, 1000, 10))
    assert slot.status[0] == kernel.TOO_LONG


LIMITS = Limits(
    ttft_budget_s=1.5, p99_slo_s=14.3, availability=0.999, soak_utilization=0.85, soak_s=120.0
)
SEARCH = Search(measure_requests=600)


def test_latency_never_improves_past_the_break():
    # Lost requests count as infinitely slow, so p99 cannot fall once some are lost.
    srv = vllm(blocks=2000, depth=64, wait=20.0)
    times = Epochs(3)
    verdicts = [
        open_loop(srv, times, rate, 1024, 128, LIMITS, SEARCH.window(rate))
        for rate in (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    ]
    p99 = [v.ttft_p99_s for v in verdicts]
    assert p99 == sorted(p99)
    assert math.isinf(p99[-1])
    assert verdicts[-1].lost_share > 0


def test_a_run_stopped_early_measures_only_what_reached_the_server():
    # Every prompt takes about 2 s to prefill, so the TTFT rule is settled after a few
    # requests and the run stops. At a tenth of a request a second nothing queues: the
    # requests that arrived after the stop never reached the server and are not lost,
    # and the ones that did got their first token in about the time one prefill takes.
    slow = replace(COST, flops_per_s=8e12)
    srv = vllm(cost=slow)
    rate = 0.1
    start, end = SEARCH.window(rate)
    v = open_loop(srv, Epochs(1), rate, 1024, 128, LIMITS, (start, end))
    assert v.rule == "ttft"
    assert v.lost_share == 0.0
    unit = Epochs(1).until(end * rate)
    arrival = unit[: np.searchsorted(unit, end * rate)] / rate
    in_window = int(np.count_nonzero(arrival >= start))
    assert 0 < v.measured < in_window
    assert 1.5 < v.ttft_p50_s < 3.0


def test_the_breaking_rate_is_bisected_and_named_by_its_rule():
    srv = vllm(depth=512, wait=60.0)
    sat = saturation_rps(concurrency_table(srv, 1024, 128, SEARCH))
    b = find_breaking(srv, 1024, 128, LIMITS, SEARCH, sat, Epochs(1))
    assert b.rate is not None
    assert not b.fails_at_any_load
    low, high = b.bracket
    assert high == b.rate
    assert low < high <= low * (1 + SEARCH.tolerance)
    passing = {v.rate: v.passed for v in b.runs}
    assert passing[low]
    assert not passing[high]
    assert b.rule in next(v for v in b.runs if v.rate == high).fired
    assert all(r is None or r >= b.rate for r in b.rule_rates.values())


def test_a_config_that_fails_at_the_lowest_rate_fails_at_any_load():
    slow = replace(COST, flops_per_s=1e12)  # a 1,024-token prompt takes seconds to prefill
    srv = vllm(cost=slow)
    sat = saturation_rps(concurrency_table(srv, 1024, 128, SEARCH))
    b = find_breaking(srv, 1024, 128, LIMITS, SEARCH, sat, Epochs(1))
    assert b.fails_at_any_load
    assert b.rate is None
    assert b.rule == "ttft"


def test_breaking_rates_are_monotone_in_bandwidth():
    rates = []
    for bw in (200e9, 400e9, 800e9, 1600e9):
        srv = vllm(cost=replace(COST, bandwidth_bytes_per_s=bw), depth=512, wait=60.0)
        sat = saturation_rps(concurrency_table(srv, 1024, 128, SEARCH))
        rates.append(find_breaking(srv, 1024, 128, LIMITS, SEARCH, sat, Epochs(5)).rate)
    assert all(r is not None for r in rates)
    assert rates == sorted(rates)


@pytest.mark.parametrize("seed", [0, 1, 9, 0xDEADBEEF, 2**32 - 1, 2**40 + 5])
def test_the_epochs_are_the_numpy_reference_bit_for_bit(seed):
    """The compiled draw (and its Python source) against mulberry32 blocks, ln and a cumsum."""
    want = np.cumsum(gaps(seed & 0xFFFFFFFF, 5000))
    e = Epochs(seed)
    e.upto(300)  # drawn in pieces: the stream and the running sum carry on
    assert np.array_equal(e.until(want[-1] - 1.0)[: want.size], want)
    py = np.empty(5000)
    state = _draw_py(seed & 0xFFFFFFFF, 0.0, py)
    assert np.array_equal(py, want)
    assert state == (seed + 5000 * 0x6D2B79F5) & 0xFFFFFFFF


@given(st.floats(1e-300, 1.0))
def test_the_scalar_ln_is_the_array_ln(x):
    assert _ln_scalar_py(x) == float(ln(np.array([x]))[0])


def test_a_run_is_the_same_bits_twice_and_the_epochs_however_drawn():
    a = Epochs(9).upto(10_000).copy()
    b = Epochs(9)
    for n in (10, 300, 2000, 10_000):
        b.upto(n)
    assert np.array_equal(a, b.upto(10_000)[:10_000])
    srv = vllm(depth=64, wait=30.0)
    one = open_loop(srv, Epochs(2), 5.0, 1024, 128, LIMITS, SEARCH.window(5.0))
    two = open_loop(srv, Epochs(2), 5.0, 1024, 128, LIMITS, SEARCH.window(5.0))
    assert one == two


@settings(max_examples=40, deadline=None)
@given(
    blocks=st.integers(20, 3000),
    seqs=st.integers(1, 64),
    budget=st.sampled_from([256, 2048]),
    users=st.integers(1, 40),
    prompt=st.integers(1, 600),
    output=st.integers(2, 200),
    policy=st.sampled_from([Policy.VLLM, Policy.LLAMA_CPP]),
)
def test_every_request_of_a_closed_loop_ends_and_nothing_leaks(
    blocks, seqs, budget, users, prompt, output, policy
):
    if policy is Policy.VLLM:
        srv = vllm(blocks=blocks, seqs=min(seqs, budget), budget=budget)
    else:
        srv = llama(slots=seqs, ctx=max(prompt + output, 16))
    run = closed_loop(srv, users, 3 * users, prompt, output)
    fates = set(run.status.tolist())
    assert fates <= {kernel.DONE, kernel.TOO_LONG}
    done = run.status == kernel.DONE
    assert np.all(run.first[done] >= run.arrival[done])
    assert np.all(run.finish[done] >= run.first[done])
    assert np.all(run.occupancy <= 1.0 + 1e-9)


@settings(max_examples=20, deadline=None)
@given(
    slots=st.integers(1, 24),
    rate=st.floats(0.05, 4.0),
    window=st.sampled_from([0, 512, 4096]),
    host=st.sampled_from([0.0, 0.004]),
    seed=st.integers(0, 2**32 - 1),
    runtime=st.sampled_from(["llama.cpp", "vllm"]),
)
def test_quiet_stretches_sum_to_what_stepping_gives(slots, rate, window, host, seed, runtime):
    # Memory-bound (weights), compute-bound (a slow card) and host-bound steps,
    # with and without a sliding window, on both schedulers: the closed-form sum
    # of a quiet stretch must land every request where running each step does.
    # vLLM with few blocks, so that some stretches end where a block is taken
    # and some runs preempt.
    cost = replace(
        COST,
        window=window,
        window_read_bytes_per_token=65536.0 if window else 0.0,
        flops_per_s=4e12 if seed % 2 else 100e12,
        step_overhead_s=host,
    )
    if runtime == "vllm":
        srv = vllm(blocks=81 + slots * 40, seqs=slots, cost=cost, depth=64, wait=30.0)
    else:
        srv = llama(slots=slots, ctx=4096, cost=cost, depth=64, wait=30.0)
    arrival = Epochs(seed).until(200 * rate)
    arrival = arrival[: np.searchsorted(arrival, 200 * rate)] / rate
    n = arrival.size
    if n == 0:
        return
    prompt = np.full(n, 1024, np.int64)
    output = (np.arange(n) % 7 + 1) * 37  # lengths that finish out of step
    fast = serve(srv, arrival, prompt, output, seconds=200.0)
    slow = serve(srv, arrival, prompt, output, seconds=200.0, step_by_step=True)
    assert np.array_equal(fast.status, slow.status)
    done = fast.status == kernel.DONE
    assert np.allclose(fast.finish[done], slow.finish[done], rtol=1e-9, atol=0)
    assert np.allclose(fast.first[done], slow.first[done], rtol=1e-9, atol=0)
    assert fast.steps == slow.steps
    assert fast.busy_s == pytest.approx(slow.busy_s, rel=1e-9)
    assert fast.running_s == pytest.approx(slow.running_s, rel=1e-9)
    assert np.allclose(fast.bound_s, slow.bound_s, rtol=1e-9, atol=1e-9)
    assert np.allclose(fast.occupancy, slow.occupancy, rtol=1e-9, atol=1e-12)
