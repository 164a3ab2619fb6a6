"""The cost of one scheduler step for a mixed batch of decode tokens and prompt chunks.

One formula serves every runtime (SPEC §4): a step's memory time (the weights
once per pass, for MoE only the distinct experts its tokens touch, and every
cached token attention reads) against its compute time (two FLOPs per active
parameter per token, plus attention; a MoE model's routed experts at the
grouped-GEMM rate), whichever is larger, plus fixed per-pass overheads, the
tensor-parallel all-reduces and, for MoE with its experts dealt out over
several GPUs (expert parallel), the all-to-alls that send tokens to their
experts and back; and the host's work for the step
(scheduling, and per sequence preparing inputs, sampling, streaming the token
out). Where the runtime prepares the next step while the device runs this one
(llama.cpp) the slower of the two sets the pace; where it schedules, launches
and then waits for the step's outputs before it schedules the next (vLLM V1
without async scheduling) the host's time adds to the device's.

The functions are scalar and use only ``+ - * /``, ``min`` and ``max``, so the
compiled loop (:mod:`backpressure.engine.serving.kernel`) and any other port
give the same bits.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
from backpressure.engine.serving.model import StepCost

Array = npt.NDArray[np.float64]

# Positions of the packed cost vector the compiled loop reads.
W_DENSE, W_EXPERT, KV_FULL, KV_WINDOW, WINDOW, BANDWIDTH = 0, 1, 2, 3, 4, 5
FLOPS_TOKEN, FLOPS_PAIR, FLOPS, PASS_S, STEP_S, AR_S, AR_TOKEN_S = 6, 7, 8, 9, 10, 11, 12
SEQ_S, REQUEST_S, LATENCY_S, STATE = 13, 14, 15, 16
EXPERT_FLOPS_TOKEN, MOE_FLOPS, A2A_S, A2A_TOKEN_S, HOST_SERIAL = 17, 18, 19, 20, 21
FLOPS_PAIR_WINDOW = 22
# llama.cpp's Metal kernels (StepCost.mat_vec_columns, ext_from, tile_tokens): the
# mat-vec limit, the small-batch kernel's first token count, the tile, and the
# tokens one weight read serves for passes of 2 .. MAX_MAT_VEC tokens
MAT_VEC_MAX, EXT_FROM, TILE, EXT_COLUMNS = 23, 24, 25, 26
MAX_MAT_VEC = 8
# CUDA graphs (StepCost.graph_tokens, eager_s)
GRAPH_TOKENS = EXT_COLUMNS + MAX_MAT_VEC - 1
EAGER_S = GRAPH_TOKENS + 1
COST_FIELDS = EAGER_S + 1
MEMORY, COMPUTE, HOST = 0, 1, 2  # what sets a step's time


@functools.lru_cache(maxsize=256)
def pack(cost: StepCost) -> Array:
    """The step cost as the float vector the compiled loop reads (read-only, shared)."""
    out = np.zeros(COST_FIELDS)
    out[W_DENSE] = cost.weight_bytes
    out[W_EXPERT] = cost.expert_bytes
    out[KV_FULL] = cost.kv_read_bytes_per_token
    out[KV_WINDOW] = cost.window_read_bytes_per_token
    out[WINDOW] = cost.window
    out[BANDWIDTH] = cost.bandwidth_bytes_per_s
    out[FLOPS_TOKEN] = cost.flops_per_token
    out[FLOPS_PAIR] = cost.attn_flops_per_pair
    out[FLOPS] = cost.flops_per_s
    out[PASS_S] = cost.pass_overhead_s
    out[STEP_S] = cost.step_overhead_s
    out[AR_S] = cost.allreduce_s
    out[AR_TOKEN_S] = cost.allreduce_s_per_token
    out[SEQ_S] = cost.seq_overhead_s
    out[REQUEST_S] = cost.request_overhead_s
    out[LATENCY_S] = cost.request_latency_s
    out[STATE] = cost.state_read_bytes_per_seq
    out[EXPERT_FLOPS_TOKEN] = cost.expert_flops_per_token
    out[MOE_FLOPS] = cost.moe_flops_per_s
    out[A2A_S] = cost.dispatch_s
    out[A2A_TOKEN_S] = cost.dispatch_s_per_token
    out[HOST_SERIAL] = 0.0 if cost.host_overlaps else 1.0
    out[FLOPS_PAIR_WINDOW] = cost.window_attn_flops_per_pair
    columns = cost.mat_vec_columns[: MAX_MAT_VEC + 1]
    out[MAT_VEC_MAX] = max(len(columns) - 1, 0)
    out[EXT_FROM] = cost.ext_from
    out[TILE] = cost.tile_tokens
    for t in range(2, len(columns)):
        out[EXT_COLUMNS + t - 2] = columns[t]
    out[GRAPH_TOKENS] = cost.graph_tokens
    out[EAGER_S] = cost.eager_s
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def distinct_experts(num_experts: int, experts_per_token: int, max_tokens: int) -> Array:
    """Expected distinct experts per MoE layer for ``t = 0 .. max_tokens`` tokens.

    Parameters
    ----------
    num_experts, experts_per_token : int
        ``n`` routed experts, ``k`` chosen per token; 0 and 0 for a dense model.
    max_tokens : int
        Largest token count of one pass [tokens].

    Returns
    -------
    numpy.ndarray
        ``E[t] = n (1 - (1 - k/n)^t)``: with routing independent and uniform, an
        expert is missed by one token with probability ``1 - k/n``. ``E[1] = k``
        and ``E[t]`` tends to ``n``. The powers are built by repeated
        multiplication (no ``pow``), so the table is the same on every platform.

    Examples
    --------
    >>> distinct_experts(8, 2, 2).tolist()
    [0.0, 2.0, 3.5]
    """
    table = np.zeros(max_tokens + 1)
    if num_experts > 0:
        miss = 1.0 - experts_per_token / num_experts
        power = 1.0
        for t in range(1, max_tokens + 1):
            power = power * miss
            table[t] = num_experts * (1.0 - power)
    # shared between runs: the cache hands out one array. Read-only for dense
    # models too, so the compiled loops see one array type and compile once.
    table.flags.writeable = False
    return table


def expert_reads(cost: StepCost, max_tokens: int) -> Array:
    """Experts read per MoE layer for ``t = 0 .. max_tokens`` tokens in one pass.

    :func:`distinct_experts`, except below ``cost.expert_pair_below`` tokens,
    where the runtime's kernel streams one expert per (token, chosen expert)
    pair: ``t k``, more than the distinct count once two tokens share an expert.

    >>> from dataclasses import replace
    >>> cost = StepCost(0.0, 0.0, 8, 2, 0.0, 0.0, 0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    >>> expert_reads(cost, 3).tolist()
    [0.0, 2.0, 3.5, 4.625]
    >>> expert_reads(replace(cost, expert_pair_below=3), 3).tolist()
    [0.0, 2.0, 4.0, 4.625]
    """
    table = distinct_experts(cost.num_experts, cost.experts_per_token, max_tokens)
    below = min(cost.expert_pair_below, max_tokens + 1)
    if cost.num_experts <= 0 or below <= 2:
        return table  # at one token the pair count is the distinct count
    table = table.copy()
    table[:below] = np.arange(below) * float(cost.experts_per_token)
    table.flags.writeable = False
    return table


def step_time(
    cost: Array,
    experts: Array,
    decode: int,
    kv_tokens: float,
    prefill: int,
    prefix_tokens: float,
    pairs: float,
    passes: int,
    seqs: int,
) -> float:
    """Seconds one step takes (:func:`step_parts`, the slowest part)."""
    return step_parts(
        cost, experts, decode, kv_tokens, prefill, prefix_tokens, pairs, passes, seqs
    )[0]


def step_parts(
    cost: Array,
    experts: Array,
    decode: int,
    kv_tokens: float,
    prefill: int,
    prefix_tokens: float,
    pairs: float,
    passes: int,
    seqs: int,
) -> tuple[float, int]:
    """Seconds one step takes.

    Parameters
    ----------
    cost : numpy.ndarray
        The packed :class:`StepCost` (:func:`pack`).
    experts : numpy.ndarray
        :func:`expert_reads` for the model, up to the largest pass.
    decode : int
        Sequences that decode one token this step [-].
    kv_tokens : float
        KV tokens those sequences hold, read by their attention [tokens].
    prefill : int
        Prompt tokens processed this step, all chunks together [tokens].
    prefix_tokens : float
        KV tokens the prompt chunks' earlier parts hold, read once [tokens].
    pairs : float
        Query-key pairs of the prompt chunks' attention [-].
    passes : int
        Forward passes the step's tokens run in (vLLM: 1) [-].
    seqs : int
        Sequences in the step, decoding or prefilling [-].

    Returns
    -------
    tuple of (float, int)
        Step time [s] (0 for an empty step), and what set it: :data:`MEMORY`,
        :data:`COMPUTE` or :data:`HOST`.
    """
    tokens = decode + prefill
    if tokens <= 0:
        return 0.0, HOST
    per_pass = tokens if passes == 1 else (tokens + passes - 1) // passes  # one pass: no division
    dense = cost[W_DENSE]
    computed = tokens
    mat_vec = int(cost[MAT_VEC_MAX])
    if mat_vec > 0:
        # llama.cpp on Metal: up to the mat-vec limit a read of the dense weights
        # serves the small-batch kernel's columns, or one token's; above it a
        # pass computes whole tiles
        if 2 <= per_pass <= mat_vec:
            reads = per_pass
            ext = int(cost[EXT_FROM])
            if ext > 0 and per_pass >= ext:
                columns = int(cost[EXT_COLUMNS + per_pass - 2])
                reads = (per_pass + columns - 1) // columns
            dense = dense * reads
        elif per_pass > mat_vec:
            tile = int(cost[TILE])
            if tile > 0:
                computed = max(tokens, passes * ((per_pass + tile - 1) // tile) * tile)
    weights = passes * (dense + cost[W_EXPERT] * experts[per_pass])
    window = cost[WINDOW]
    windowed = kv_tokens if window <= 0.0 else min(kv_tokens, decode * window)
    kv = (kv_tokens + prefix_tokens) * cost[KV_FULL] + (windowed + prefix_tokens) * cost[KV_WINDOW]
    memory = (weights + kv + decode * cost[STATE]) / cost[BANDWIDTH]
    attention = cost[FLOPS_PAIR] * (kv_tokens + pairs)
    if window > 0.0:
        # a windowed layer's query meets at most `window` keys
        attention += cost[FLOPS_PAIR_WINDOW] * (windowed + min(pairs, prefill * window))
    compute = (cost[FLOPS_TOKEN] * computed + attention) / cost[FLOPS]
    if cost[EXPERT_FLOPS_TOKEN] > 0.0:
        # the grouped expert GEMMs run after the dense ones, at their own rate
        compute = compute + cost[EXPERT_FLOPS_TOKEN] * tokens / cost[MOE_FLOPS]
    link = cost[AR_S] + tokens * cost[AR_TOKEN_S] + cost[A2A_S] + tokens * cost[A2A_TOKEN_S]
    device = max(memory, compute) + passes * cost[PASS_S] + link
    # too many tokens for a captured graph: the layers launch eagerly (1 above it, else 0)
    device += cost[EAGER_S] * min(max(tokens - cost[GRAPH_TOKENS], 0.0), 1.0)
    host = cost[STEP_S] + seqs * cost[SEQ_S]
    bound = HOST if host > device else MEMORY if memory >= compute else COMPUTE
    if cost[HOST_SERIAL] > 0.0:
        # The device waits while the host schedules this step, prepares its inputs
        # and takes in its outputs: the two add.
        return device + host, bound
    # The host prepares the next step while the device runs this one: the slower binds.
    return max(host, device), bound
