"""Flat result records the engine returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from backpressure.engine.kv_pool import VllmPool

KvBasis = Literal["exact", "heuristic"]
Ceiling = Literal["kv", "bandwidth", "compute"]


@dataclass(frozen=True, slots=True)
class CapacityResult:
    """Everything the capacity engine says about one device x model x quant x context.

    Bytes are bytes, times are seconds, rates are per second.

    ``kv_bytes_per_token`` is the per-token cost of the layers that cache keys
    and values, before windows (a hybrid model's recurrent layers add nothing
    per token); ``kv_bytes_per_request`` what the runtime charges one request
    at ``context_tokens`` (windows, pages, padding and recurrent state
    included); ``kv_capacity_tokens`` the pool in the runtime's own count (vLLM:
    its "GPU KV cache size" line, a full-attention-equivalent figure).
    """

    fits: bool
    slots: int
    memory_bytes: int
    usable_memory_bytes: int
    weights_bytes: int
    overhead_bytes: int
    kv_budget_bytes: int
    kv_bytes_per_token: int
    kv_bytes_per_request: int
    kv_capacity_tokens: int
    kv_basis: KvBasis
    context_tokens: int
    total_params: int
    active_params: int
    # Decode step model: one step of a batch of b streams holding k KV tokens in
    # total takes max(step_fixed_s + k * step_per_kv_token_s, b * step_compute_per_seq_s).
    # Fields below are None when the device has no bandwidth (or FLOPS) figure.
    step_fixed_s: float | None
    step_per_kv_token_s: float | None
    step_compute_per_seq_s: float | None
    decode_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    bandwidth_concurrency: int | None
    # Smaller batches whose streams decode under the floor although this many do
    # (a kernel switch: llama.cpp on Metal), as (first, last) ranges.
    bandwidth_slow_batches: tuple[tuple[int, int], ...]
    effective_concurrency: int
    binding_ceiling: Ceiling | None
    error_band_pct: int
    error_band_reason: str
    # Recurrent state (linear attention, Mamba) inside kv_bytes_per_request [bytes];
    # the model's layer kinds in words; the runtime release the budget follows.
    kv_state_bytes_per_request: int = 0
    kv_layout: str = ""
    runtime_version: str = ""
    # vLLM: tokens per page of its pool (the block size, grown for hybrids); 0: not paged.
    kv_block_tokens: int = 0
    # vLLM: pages in one GPU's pool, and how its layer groups draw on them (what
    # the scheduler admits by); 0 and None: not paged.
    kv_pool_pages: int = 0
    kv_pool: VllmPool | None = None
