"""The two ceilings: KV slots, and decode speed bounded by memory bandwidth.

A decode step reads the active weights once for the whole batch plus every
stream's KV cache, so its time is ``bytes / (efficiency x bandwidth)`` plus a
fixed per-step overhead, unless the batch's FLOPs take longer (compute bound).
"""

from __future__ import annotations

from dataclasses import dataclass

from backpressure.engine.arch import Experts
from backpressure.engine.kernels import NO_METAL, MetalKernels
from backpressure.engine.results import Ceiling


@dataclass(frozen=True, slots=True)
class StepModel:
    """Time of one decode step as a function of batch size and cached tokens.

    A step reads ``dense_bytes`` whatever its batch (attention, dense MLPs,
    shared experts, norms, the output head) and, in each MoE layer, every routed
    expert one of its tokens picked: ``distinct_experts(b)`` experts of
    ``expert_bytes`` each for a batch of b streams. Every stream adds its cached
    tokens' KV and, for linear-attention and Mamba layers, its recurrent state.

    On Apple silicon under llama.cpp the Metal kernels change both reads for
    small batches (:mod:`backpressure.engine.kernels`): the dense weights are
    streamed once per group of columns, and below ``pair_reads_below`` streams
    an expert is read for every (stream, chosen expert) pair.
    """

    dense_bytes: float
    expert_bytes: float
    experts: Experts | None
    kv_bytes_per_token: float
    bandwidth_bytes_per_s: float
    overhead_s: float
    compute_per_seq_s: float
    state_bytes_per_stream: float = 0.0
    metal: MetalKernels = NO_METAL
    pair_reads_below: int = 0

    @property
    def irregular_below(self) -> int:
        """Batches below this may step faster than a smaller one (a kernel switch)."""
        return max(self.pair_reads_below, self.metal.mat_vec_max + 1)

    def weight_bytes_at(self, batch: int) -> float:
        """Weight bytes one step reads for ``batch`` streams [bytes]."""
        b = max(1, batch)
        dense = self.dense_bytes * self.metal.dense_reads(b)
        if self.experts is None:
            return dense
        if 2 <= b < self.pair_reads_below:
            per_layer = float(b * self.experts.experts_per_token)
        else:
            per_layer = distinct_experts(self.experts, b)
        return dense + self.experts.moe_layers * per_layer * self.expert_bytes

    def memory_time_s(self, batch: int, kv_tokens: float) -> float:
        """Bandwidth-bound step time [s]."""
        moved = self.weight_bytes_at(batch) + kv_tokens * self.kv_bytes_per_token
        moved += batch * self.state_bytes_per_stream
        return moved / self.bandwidth_bytes_per_s + self.overhead_s

    def step_time_s(self, batch: int, kv_tokens: float) -> float:
        """Step time: the slower of the memory and compute bounds [s]."""
        computed = self.metal.computed_tokens(batch)
        return max(self.memory_time_s(batch, kv_tokens), computed * self.compute_per_seq_s)


def split_weight_bytes(
    weights_bytes: int,
    total_params: int,
    streamed_params: int,
    experts: Experts | None,
    expert_bytes_per_param: float | None = None,
) -> tuple[float, float]:
    """(dense bytes per step, bytes of one routed expert in one layer).

    ``streamed_params`` is what one token reads (active parameters less the
    embedding rows it only looks up). The routed experts cost
    ``expert_bytes_per_param`` each (their own format, e.g. MXFP4) or, when
    None, the checkpoint's average; the dense part is the rest.
    """
    per_param = weights_bytes / total_params
    if experts is None:
        return streamed_params * per_param, 0.0
    routed = experts.moe_layers * experts.num_experts * experts.expert_params
    e_bpp = per_param if expert_bytes_per_param is None else expert_bytes_per_param
    dense_bpp = (weights_bytes - routed * e_bpp) / max(1, total_params - routed)
    active_routed = experts.moe_layers * experts.experts_per_token * experts.expert_params
    return (streamed_params - active_routed) * dense_bpp, experts.expert_params * e_bpp


def distinct_experts(experts: Experts, batch: int) -> float:
    """Expected experts a layer reads for ``batch`` tokens routed independently.

    With ``k`` of ``n`` experts chosen per token and uniform routing, an expert is
    untouched by one token with probability ``1 - k/n``, so the expected number
    read is ``n (1 - (1 - k/n)^batch)``: ``k`` for one token, ``n`` in the limit.
    """
    if batch <= 0:
        return 0.0
    n, k = experts.num_experts, experts.experts_per_token
    return n * (1.0 - (1.0 - k / n) ** batch)


def read_params(active_params: int, experts: Experts | None, batch: int) -> float:
    """Parameters one decode step reads for ``batch`` streams [parameters]."""
    if experts is None or batch <= 1:
        return float(active_params)
    extra = distinct_experts(experts, batch) - experts.experts_per_token
    return active_params + experts.moe_layers * extra * experts.expert_params


def bandwidth_concurrency(
    step: StepModel,
    kv_tokens_per_stream: float,
    min_stream_tokens_per_s: float,
    limit: int = 1 << 20,
) -> int:
    """Largest batch whose every stream still decodes at the minimum rate.

    From :attr:`StepModel.irregular_below` on, step time never falls as the batch
    grows, so a binary search finds the edge; below it a kernel switch can make
    a larger batch faster than a smaller one (llama.cpp on Metal), so those
    batches are tried one by one and a smaller batch may fail where this one
    passes (:func:`slow_batches`). Returns 0 when even one stream is slower than
    the minimum.
    """
    budget = 1.0 / min_stream_tokens_per_s

    def ok(b: int) -> bool:
        return step.step_time_s(b, b * kv_tokens_per_stream) <= budget

    if not ok(1):
        return 0
    regular = max(1, min(step.irregular_below, limit))
    best = max(b for b in range(1, regular + 1) if b == 1 or ok(b))
    if best < regular:
        return best  # the monotone region fails from its start
    lo, hi = regular, 2 * regular
    while hi < limit and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit)
    if ok(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def slow_batches(
    step: StepModel, kv_tokens_per_stream: float, min_stream_tokens_per_s: float, edge: int
) -> tuple[tuple[int, int], ...]:
    """Batches below ``edge`` whose streams decode under the minimum rate, as ranges.

    Empty unless a kernel switch makes step time fall as the batch grows
    (:attr:`StepModel.irregular_below`): a server passes through these batch
    sizes on its way up to ``edge``.
    """
    budget = 1.0 / min_stream_tokens_per_s
    slow = [
        b
        for b in range(2, min(edge, step.irregular_below + 1))
        if step.step_time_s(b, b * kv_tokens_per_stream) > budget
    ]
    ranges: list[tuple[int, int]] = []
    for b in slow:
        if ranges and ranges[-1][1] == b - 1:
            ranges[-1] = (ranges[-1][0], b)
        else:
            ranges.append((b, b))
    return tuple(ranges)


def binding_ceiling(
    slots: int, bw_concurrency: int, step: StepModel, kv_tokens_per_stream: float
) -> Ceiling:
    """Which ceiling stops the batch: ``kv``, ``bandwidth`` or ``compute``."""
    if slots <= bw_concurrency:
        return "kv"
    b = bw_concurrency + 1
    compute = b * step.compute_per_seq_s
    return "compute" if compute >= step.memory_time_s(b, b * kv_tokens_per_stream) else "bandwidth"
