"""An LLM node's service is the serving model's step cost, priced per tick."""

import numpy as np
import pytest
from backpressure.engine.serving.breaking import closed_loop_point
from backpressure.engine.serving.model import Policy, Scheduler, Server, StepCost
from backpressure.engine.serving.step import distinct_experts, pack, step_parts
from backpressure.engine.sim import llm as llm_step
from backpressure.engine.sim.model import LlmSpec, llm_times
from hypothesis import given, settings
from hypothesis import strategies as st

# A 7B-class model at 4.9 bits on a 1 TB/s card (hand-made, not the catalog's).
COST = StepCost(
    weight_bytes=4.3e9,
    expert_bytes=0.0,
    num_experts=0,
    experts_per_token=0,
    kv_read_bytes_per_token=131072.0,
    window_read_bytes_per_token=0.0,
    window=0,
    bandwidth_bytes_per_s=0.8e12,
    flops_per_token=1.4e10,
    attn_flops_per_pair=4.0 * 32 * 32 * 128,
    flops_per_s=1.2e14,
    pass_overhead_s=0.002,
    step_overhead_s=0.0005,
    seq_overhead_s=2e-5,
)
PROMPT, OUT = 1024, 128


def _llm(slots=18, budget=2048, ubatch=512):
    return LlmSpec(slots, COST, budget, ubatch, PROMPT, OUT)


def _step(decode, prefill, prefix=0.0, ubatch=512, seqs=None):
    tokens = decode + prefill
    passes = (tokens + ubatch - 1) // ubatch
    pairs = prefill * (PROMPT + 1) * 0.5
    kv = decode * (PROMPT + 0.5 * OUT)
    seqs = decode + (1 if prefill else 0) if seqs is None else seqs
    experts = distinct_experts(0, 0, 4096)
    return step_parts(pack(COST), experts, decode, kv, prefill, prefix, pairs, passes, seqs)[0]


def test_a_lone_request_costs_its_prompt_step_then_one_decode_step_per_token():
    slot, first = llm_times(_llm(), np.array([0.0]))
    assert first[0] == _step(0, PROMPT)
    assert slot[0] == pytest.approx(_step(0, PROMPT) + (OUT - 1) * _step(1, 0), rel=1e-12)
    # a fraction of a request in flight is one sequence in the batch
    assert llm_times(_llm(), np.array([0.3]))[0][0] == slot[0]


def test_a_full_batch_shares_its_steps_with_every_prompt():
    slot, first = llm_times(_llm(), np.array([18.0]))
    with_prompt, decode = _step(17, PROMPT), _step(18, 0)
    # a request's own prompt step and 127 decode steps: 128 steps, in which the
    # 18 prompts of the batch each ride once (the others decode meanwhile)
    assert slot[0] == pytest.approx(18 * with_prompt + (128 - 18) * decode, rel=1e-12)
    assert first[0] == _step(18, PROMPT)  # the next prompt rides beside 18 decoding
    assert slot[0] == llm_times(_llm(), np.array([17.5]))[0][0]  # 17.5 is 18 sequences
    assert slot[0] > llm_times(_llm(), np.array([17.0]))[0][0]


def test_a_small_token_budget_splits_the_prompt_into_chunks():
    llm = _llm(slots=4, budget=300, ubatch=300)
    _, first = llm_times(llm, np.array([2.0]))
    chunk = 300 - 2
    chunks = -(-PROMPT // chunk)  # 4 chunks, each reading the earlier ones' KV
    prefix = chunk * (chunks - 1) * 0.5
    assert first[0] == chunks * _step(2, chunk, prefix, ubatch=300)


def test_the_tick_model_saturates_where_the_discrete_scheduler_does():
    # llama.cpp with 18 slots of 8k: the closed loop of engine.serving, 18 users
    server = Server(Scheduler(Policy.LLAMA_CPP, 0, 1, 18, 2048, 512, 8192), COST, 64, 60.0)
    point = closed_loop_point(server, 18, PROMPT, OUT)
    slot, _ = llm_times(_llm(), np.array([18.0]))
    # 1.5 %: the fluid mix is the scheduler's average, not its step-by-step order
    assert 18 / slot[0] == pytest.approx(point.requests_per_s, rel=0.015)
    alone = closed_loop_point(server, 1, PROMPT, OUT)
    assert 1000 * llm_times(_llm(), np.array([0.0]))[1][0] == pytest.approx(alone.ttft_ms, rel=1e-3)


def test_explicit_numbers_read_as_a_step_cost():
    llm = LlmSpec.explicit(8, 4000.0, 0.01, 2e-7, 0.0005, prompt_tokens=600, output_tokens=100)
    assert llm.max_batched_tokens >= llm.slots * (600 + 1)  # never chunks, never binds
    slot, first = llm_times(llm, np.array([0.0]))
    assert first[0] == pytest.approx(600 / 4000.0)  # the prompt step is compute-bound
    decode = max(0.01 + 650 * 2e-7, 1 / 4000.0, 0.0005)
    assert slot[0] == pytest.approx(600 / 4000.0 + 99 * decode, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.floats(0.0, 80.0),
    st.integers(1, 64),
    st.integers(1, 4096),
    st.integers(1, 512),
    st.integers(64, 8192),
)
def test_the_scalar_functions_give_the_compiled_bits(inflight, slots, prompt, output, budget):
    experts = distinct_experts(8, 2, max(budget, slots + 1))
    cost = pack(COST)
    args = (cost, experts, slots, prompt, output, budget, min(budget, 512), inflight)
    assert llm_step._slot_s_py(*args) == llm_step.slot_s(*args)
    assert llm_step._first_token_s_py(*args) == llm_step.first_token_s(*args)
    assert llm_step._batch_py(inflight, slots) <= slots
