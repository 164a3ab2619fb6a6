"""Plain inputs of the serving simulation: how a server schedules, and what a step costs.

A model server runs in *steps*: each step is one forward pass (or, in llama.cpp,
one batch split into micro-batches) over a mix of decode tokens (one per
sequence that is generating) and prompt chunks (prefill). How the next step's
mix is chosen is the runtime's scheduler (:class:`Scheduler`); what it costs is
the step model (:class:`StepCost`). Both are plain numbers here, built from a
capacity result by :mod:`backpressure.engine.serving.spec`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum


class Policy(IntEnum):
    """Which runtime's scheduler the server follows."""

    VLLM = 0  # paged KV in blocks, admission by blocks held, chunked prefill, preemption
    LLAMA_CPP = 1  # -np fixed slots of ctx/np tokens, continuous batching, no preemption


@dataclass(frozen=True, slots=True)
class Scheduler:
    """The scheduler's limits.

    Attributes
    ----------
    policy : Policy
        vLLM-style or llama.cpp-style scheduling.
    kv_blocks : int
        vLLM: KV-cache blocks in the pool [-]. llama.cpp: unused (0).
    block_tokens : int
        vLLM: tokens per KV block (16 by default) [tokens].
    max_seqs : int
        vLLM: ``max_num_seqs``. llama.cpp: the slot count ``-np`` [-].
    max_batched_tokens : int
        vLLM: ``max_num_batched_tokens``, the per-step token budget shared by
        decode tokens and prompt chunks. llama.cpp: ``n_batch`` [tokens].
    ubatch_tokens : int
        llama.cpp: ``n_ubatch``, the tokens of one forward pass; a batch of more
        runs as several passes. vLLM: equal to ``max_batched_tokens`` [tokens].
    slot_tokens : int
        llama.cpp: context per slot, ``ctx / np`` [tokens]. vLLM: ``max_model_len``.
    """

    policy: Policy
    kv_blocks: int
    block_tokens: int
    max_seqs: int
    max_batched_tokens: int
    ubatch_tokens: int
    slot_tokens: int


# Fields added after the sweep's arrival seeds were keyed by this record's repr
# (generator.sweep.rig.serving_key): left out of it while at their default, so a
# new field that changes nothing leaves every seed, and every published rate, as it was.
LATE_FIELDS = (
    "expert_pair_below",
    "mat_vec_columns",
    "ext_from",
    "tile_tokens",
    "graph_tokens",
    "eager_s",
)


@dataclass(frozen=True, slots=True, repr=False)
class StepCost:
    """What one step costs: the larger of its memory and compute time, plus overheads.

    A step that runs ``b`` decode tokens whose sequences hold ``K`` KV tokens and
    prompt chunks of ``p`` tokens in ``n`` passes takes::

        memory  = (n W(t / n) + K kv_read + prefix kv_read + b state) / bandwidth
        compute = (flops_per_token t + attn_flops_per_pair (K + pairs)
                   + window_attn_flops_per_pair (K_w + min(pairs, p window))) / flops
                  + expert_flops_per_token t / moe_flops
        device  = max(memory, compute) + n pass_overhead + all-reduce + dispatch
                  (+ eager, when t > graph_tokens)
        host    = step_overhead + s seq_overhead
        step    = max(device, host)   (host_overlaps)
                  device + host       (otherwise)

    with ``t = b + p`` tokens, ``W(t) = weight_bytes + expert_bytes E(t)`` the
    weights a pass of ``t`` tokens reads (``E(t)`` distinct experts per MoE
    layer, :func:`backpressure.engine.serving.step.distinct_experts`), and
    ``pairs`` the query-key pairs of the prompt chunks' attention. Windowed
    layers attend to at most ``window`` keys per query: ``K_w = min(K, b window)``
    for decode, and at most ``p window`` pairs for the prompt chunks (exact when
    every chunk lies wholly inside or wholly beyond the first window).

    Attributes
    ----------
    weight_bytes : float
        Weights every pass reads whatever the tokens: attention, dense MLPs,
        shared experts, norms, the output head [bytes].
    expert_bytes : float
        One routed expert summed over the MoE layers [bytes]; 0 for dense models.
    num_experts, experts_per_token : int
        Routed experts per MoE layer and how many a token picks [-].
    kv_read_bytes_per_token : float
        KV bytes attention reads per cached token in full-attention layers [bytes].
    window_read_bytes_per_token : float
        The same for sliding-window layers, which read at most ``window`` tokens
        per sequence [bytes].
    window : int
        The sliding window [tokens]; 0 when no layer has one.
    bandwidth_bytes_per_s : float
        Memory bandwidth a step achieves (datasheet times efficiency) [bytes/s].
    flops_per_token : float
        Matrix FLOPs per token outside the routed experts, ``2 x`` the active
        parameters that are not routed experts [FLOP].
    attn_flops_per_pair : float
        Attention FLOPs per query-key pair over the full-attention layers and
        their heads [FLOP]; layers without a KV cache (linear attention, Mamba)
        have none.
    window_attn_flops_per_pair : float
        The same over the sliding-window and chunked layers [FLOP].
    flops_per_s : float
        Compute a step achieves (dense peak times efficiency) [FLOP/s].
    pass_overhead_s : float
        Fixed cost of one forward pass: kernel launches per layer [s].
    step_overhead_s : float
        Fixed cost of one scheduler step besides its passes: scheduling,
        sampling, detokenizing [s].
    allreduce_s : float
        Tensor parallelism: latency of a step's all-reduces (two per layer) [s].
    allreduce_s_per_token : float
        Tensor parallelism: link time per token of those all-reduces [s].
    seq_overhead_s : float
        Host-side cost per sequence in a step (``s`` of them): preparing its
        inputs, sampling, streaming its token out [s].
    request_overhead_s : float
        Front-end work of taking in one request (parsing, tokenizing) before the
        scheduler sees it. The front end shares its time among the requests it
        is taking in: one alone waits this long, a burst of ``N`` arriving
        together reaches the scheduler together after ``N`` times it; it caps
        the rate requests can enter [s].
    request_latency_s : float
        Time a request spends on its way in and its first token on its way out
        that overlaps other requests' (network, HTTP, streaming): it adds to
        every TTFT but caps nothing [s].
    state_read_bytes_per_seq : float
        Recurrent state (linear attention, Mamba layers) each decoding sequence
        reads and writes back once a step [bytes]; 0 for attention-only models.
    expert_flops_per_token : float
        Matrix FLOPs per token in the routed experts, ``2 x k x`` one expert's
        parameters summed over the MoE layers [FLOP]; 0 for dense models.
    moe_flops_per_s : float
        Compute the grouped expert GEMMs achieve (dense peak times the MoE kernel
        efficiency): each touched expert multiplies only the few tokens routed to
        it, far from the shapes that reach a dense GEMM's rate [FLOP/s].
    dispatch_s : float
        Expert parallelism over several GPUs: latency of a step's all-to-alls
        (dispatch and combine, two per MoE layer) [s].
    dispatch_s_per_token : float
        Expert parallelism: link time per token of those all-to-alls [s].
    expert_pair_below : int
        Below this many tokens in a pass the runtime's MoE kernel streams one
        expert per (token, chosen expert) pair, ``t k`` expert reads, instead of
        each distinct expert once (llama.cpp on Metal: 32); 0: never.
    mat_vec_columns : tuple of int
        Up to ``len - 1`` tokens a pass runs a mat-vec kernel, whose read of a
        dense weight serves ``mat_vec_columns[t]`` tokens from ``ext_from`` tokens
        on, and one token below (llama.cpp on Metal); empty: one read a pass.
    ext_from : int
        Fewest tokens of a pass the small-batch kernel takes for these weights
        and this model's rows; 0: never (each token's column reads them).
    tile_tokens : int
        Above the mat-vec limit, the tokens a matrix tile computes whether
        filled or not: a pass computes whole tiles [tokens]; 0: its tokens.
    graph_tokens : int
        Most tokens a step runs as a captured CUDA graph (vLLM:
        ``min(2 max_num_seqs, 512)``, no more than ``max_num_batched_tokens``);
        a step of more launches its kernels one by one from the host. 0: no
        graphs, or none of the term (``eager_s`` 0 with it).
    eager_s : float
        What a step above ``graph_tokens`` adds: its layers' kernels launched
        eagerly, for a MoE model the many small ones of routing and the expert
        kernels (vLLM: ``serving_moe_eager_layer_s_vllm`` per MoE layer) [s].
    host_overlaps : bool
        Whether the host's work for a step runs while the device computes the
        previous one (llama.cpp), so the slower binds, or before and after the
        device's, while it idles (vLLM V1 without async scheduling), so the two
        add.
    """

    weight_bytes: float
    expert_bytes: float
    num_experts: int
    experts_per_token: int
    kv_read_bytes_per_token: float
    window_read_bytes_per_token: float
    window: int
    bandwidth_bytes_per_s: float
    flops_per_token: float
    attn_flops_per_pair: float
    flops_per_s: float
    pass_overhead_s: float
    step_overhead_s: float
    allreduce_s: float = 0.0
    allreduce_s_per_token: float = 0.0
    seq_overhead_s: float = 0.0
    request_overhead_s: float = 0.0
    request_latency_s: float = 0.0
    state_read_bytes_per_seq: float = 0.0
    expert_flops_per_token: float = 0.0
    moe_flops_per_s: float = 1.0
    dispatch_s: float = 0.0
    dispatch_s_per_token: float = 0.0
    host_overlaps: bool = True
    window_attn_flops_per_pair: float = 0.0
    expert_pair_below: int = 0
    mat_vec_columns: tuple[int, ...] = ()
    ext_from: int = 0
    tile_tokens: int = 0
    graph_tokens: int = 0
    eager_s: float = 0.0

    def __repr__(self) -> str:
        shown = (
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.name not in LATE_FIELDS or getattr(self, f.name) != f.default
        )
        return f"StepCost({', '.join(shown)})"


@dataclass(frozen=True, slots=True)
class Server:
    """A model server: its scheduler, its step cost, and how its queue treats waiting work.

    Attributes
    ----------
    scheduler : Scheduler
        Limits of the runtime's scheduler.
    cost : StepCost
        The step model.
    queue_depth : int
        Requests that may wait for admission; an arrival beyond it is shed [-].
    max_wait_s : float
        A request waiting longer than this for admission is abandoned (the
        client or proxy times out) [s].
    """

    scheduler: Scheduler
    cost: StepCost
    queue_depth: int
    max_wait_s: float
