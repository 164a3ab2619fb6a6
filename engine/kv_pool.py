"""How each runtime's allocator lays a model's cache out in memory.

The physics (:mod:`backpressure.engine.kv`) says what a request needs; the
allocator decides what it is charged. Two allocators, as their code has them:

vLLM's hybrid KV-cache manager (V1)
    Layers are grouped by kind (full, sliding window, chunked local, linear or
    Mamba state) into groups of equal size (the count of the rarest kind, or of
    the commonest when the counts are within 25 %), and every group draws pages
    from one pool. A page holds ``block`` tokens of one layer; for
    attention+state hybrids the block grows until an attention page holds a whole
    recurrent state. Worst case per request: full layers ``cdiv(L, block)``
    pages, sliding layers ``cdiv(min(window - 1 + T, L), block) + 1``, chunked
    layers ``cdiv(min(chunk + T, L), block)``, state layers one page (``L`` the
    context, ``T`` ``max_num_batched_tokens``). vLLM logs ``GPU KV cache size:
    num_blocks // groups * block`` tokens, a full-attention-equivalent count: for
    sliding and hybrid models far fewer tokens than it really serves.

llama.cpp's cells
    Every slot keeps ``n_ctx_seq`` cells (padded to 256) in full-attention layers,
    ``PAD(min(n_ctx_seq, n_swa + n_ubatch), 256)`` cells in sliding-window and
    chunked layers (``swa_full`` off, the default), and one recurrent state in
    float32 per sequence.

References
----------
vllm-project/vllm v0.12.0: ``vllm/v1/core/kv_cache_utils.py``
(``_get_kv_cache_groups_uniform_page_size``, ``get_num_blocks``,
``_report_kv_cache_config``), ``vllm/v1/kv_cache_interface.py``
(``SlidingWindowSpec``, ``ChunkedLocalAttentionSpec``, ``MambaSpec``),
``vllm/model_executor/models/config.py`` (``HybridAttentionMambaModelConfig``).
ggml-org/llama.cpp ``src/llama-kv-cache-iswa.cpp`` @02c28f5 (``size_swa``),
``common/common.h`` @001d906 (``swa_full = false``, ``n_ubatch = 512``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from backpressure.engine.arch import Attention, ModelArch

# llama.cpp pads every cache to 256 cells (ggml-org/llama.cpp issue #17037).
LLAMA_CPP_PAD = 256
# llama.cpp keeps recurrent (Mamba, delta-rule) states in float32: src/llama-model.cpp
# creates llama_memory_hybrid with /* recurrent_type_k */ GGML_TYPE_F32 (and _v), whatever
# -ctk/-ctv say (quoted in public write-ups of the llama.cpp source).
LLAMA_CPP_STATE_BYTES = 4
# vLLM's attention backends need blocks in multiples of 16 tokens.
VLLM_BLOCK_ALIGN = 16
# Kinds whose counts are this close share one group size (vLLM v0.12 uses 1.25).
VLLM_GROUP_SLACK = 1.25


def _pad(n: int, to: int) -> int:
    return -(-n // to) * to


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kv_heads_per_gpu(attention: Attention, gpus: int) -> int:
    """KV heads one GPU caches under tensor parallelism (replicated below one per GPU)."""
    if attention.mla_latent_dim:
        return 1
    return max(1, attention.num_kv_heads // max(1, gpus))


def token_bytes_per_layer(attention: Attention, bytes_per_element: float, gpus: int = 1) -> float:
    """Cache bytes of one token in one attention layer on one GPU [bytes]."""
    if attention.mla_latent_dim:
        return attention.mla_latent_dim * bytes_per_element
    return 2 * kv_heads_per_gpu(attention, gpus) * attention.head_dim * bytes_per_element


def state_bytes_per_layer(arch: ModelArch, bytes_per_element: float, gpus: int = 1) -> float:
    """One sequence's recurrent state in one layer on one GPU [bytes]."""
    if arch.recurrent is None:
        return 0.0
    return arch.recurrent.elements_per_layer * bytes_per_element / max(1, gpus)


def vllm_state_bytes_per_layer(arch: ModelArch, gpus: int = 1) -> float:
    """One sequence's recurrent state in one layer on one GPU as vLLM keeps it [bytes]."""
    if arch.recurrent is None:
        return 0.0
    return arch.recurrent.vllm_bytes_per_layer(arch.dtype_bytes) / max(1, gpus)


@dataclass(frozen=True, slots=True)
class VllmPool:
    """vLLM's paged pool for one model on one GPU of a tensor-parallel group.

    ``group_size`` layers share a page index; ``groups`` groups draw from one
    pool of ``page_bytes`` pages of ``block`` tokens. ``pages_per_request`` is the
    worst case of one request at the context asked for (what vLLM's "Maximum
    concurrency" line divides by).
    """

    block: int
    page_bytes: int
    group_size: int
    groups: int
    pages_per_request: int
    # (kind, groups of it, window or chunk): what :meth:`held_pages` charges
    kinds: tuple[tuple[str, int, int], ...] = ()

    def blocks(self, available_bytes: int) -> int:
        """Pages in the pool (``get_num_blocks``) [-]."""
        return max(0, int(available_bytes // self.page_bytes // self.group_size))

    def reported_tokens(self, available_bytes: int) -> int:
        """The ``GPU KV cache size: N tokens`` line [tokens]."""
        return self.blocks(available_bytes) // self.groups * self.block

    def max_concurrency(self, available_bytes: int) -> float:
        """The ``Maximum concurrency for L tokens per request`` line [-]."""
        return self.blocks(available_bytes) / self.pages_per_request

    def request_bytes(self) -> int:
        """Worst-case memory one request holds on one GPU [bytes]."""
        return self.pages_per_request * self.page_bytes * self.group_size

    def held_pages(self, tokens: int) -> int:
        """Pages a decoding request that holds ``tokens`` KV tokens keeps [-].

        Full layers keep every token; sliding layers free the pages wholly
        outside the window as it moves (the last ``window - 1`` tokens and the
        new one: ``cdiv(window - 1, block) + 1`` pages), chunked layers those
        before the current chunk; a state layer keeps one page.

        >>> pool = VllmPool(16, 1, 18, 2, 0, (("full", 1, 0), ("sliding", 1, 128)))
        >>> pool.held_pages(1_000), pool.held_pages(32_000)
        (72, 2009)
        """
        total = 0
        for kind, groups, window in self.kinds:
            pages = _cdiv(tokens, self.block)
            if kind == "state":
                pages = 1
            elif kind.startswith("sliding"):
                pages = min(pages, _cdiv(window - 1, self.block) + 1)
            elif kind.startswith("chunked"):
                pages = min(pages, _cdiv(window, self.block))
            total += groups * pages
        return total

    def full_equivalent_blocks(self, pages: int, tokens: int) -> int:
        """``pages`` of this pool as blocks of a full-attention pool, for requests of ``tokens``.

        A scheduler that charges a request ``cdiv(tokens, block)`` blocks admits
        as many requests of ``tokens`` from these blocks as vLLM's hybrid manager
        does from ``pages``; for a model of full layers only, ``pages`` itself.

        >>> pool = VllmPool(16, 1, 18, 2, 0, (("full", 1, 0), ("sliding", 1, 128)))
        >>> pool.full_equivalent_blocks(5_714, 32_000) // 2_000  # requests of 32,000 tokens
        2
        """
        held = self.held_pages(tokens)
        if held <= 0:
            return pages
        return pages * _cdiv(tokens, self.block) // held


def _kinds(arch: ModelArch) -> dict[str, tuple[int, int]]:
    """VLLM's layer kinds (one per KV spec): name -> (layers, window or chunk)."""
    a = arch.attention
    kinds: dict[str, tuple[int, int]] = {}
    if a.full_layers:
        kinds["full"] = (a.full_layers, 0)
    for w in sorted({w for w in a.window_per_layer if w}):
        kinds[f"{a.local}:{w}"] = (a.window_per_layer.count(w), w)
    if arch.recurrent is not None:
        kinds["state"] = (arch.recurrent.layers, 0)
    return kinds


def _pages(kind: str, window: int, context: int, batched: int, block: int) -> int:
    if kind == "state":
        return 1
    if kind.startswith("sliding"):
        return _cdiv(min(window - 1 + batched, context), block) + 1
    if kind.startswith("chunked"):
        return _cdiv(min(window + batched, context), block)
    return _cdiv(context, block)


def vllm_pool(
    arch: ModelArch,
    kv_bytes_per_element: float,
    context: int,
    max_num_batched_tokens: int,
    gpus: int = 1,
    block_tokens: int = VLLM_BLOCK_ALIGN,
) -> VllmPool:
    """Lay out vLLM's pool for ``arch`` served at ``context`` tokens.

    Parameters
    ----------
    arch : ModelArch
        The model.
    kv_bytes_per_element : float
        KV-cache element size [bytes]; recurrent states stay in the model dtype
        (vLLM's ``mamba_cache_dtype`` default ``auto``).
    context : int
        ``max_model_len`` [tokens].
    max_num_batched_tokens : int
        The step's token budget, which sliding and chunked layers keep on top of
        their window [tokens].
    gpus : int
        Tensor-parallel degree [-].
    block_tokens : int
        Default block size [tokens].

    Examples
    --------
    Qwen3-Next-80B-A3B at TP2: a Gated DeltaNet state (548,864 bytes per GPU)
    needs 536 attention tokens, so the block becomes 544 tokens.
    """
    per_token = token_bytes_per_layer(arch.attention, kv_bytes_per_element, gpus)
    kinds = _kinds(arch)
    block = block_tokens
    if arch.recurrent is not None and per_token > 0:
        state = vllm_state_bytes_per_layer(arch, gpus)
        block = max(block, VLLM_BLOCK_ALIGN * math.ceil(state / (VLLM_BLOCK_ALIGN * per_token)))
    page = int(block * per_token) or math.ceil(vllm_state_bytes_per_layer(arch, gpus))
    counts = [n for n, _ in kinds.values()]
    group_size = min(counts)
    if max(counts) < min(counts) * VLLM_GROUP_SLACK:
        group_size = max(counts)
    groups, pages = 0, 0
    per_kind = []
    for kind, (n, window) in kinds.items():
        g = _cdiv(n, group_size)
        groups += g
        pages += g * _pages(kind, window, context, max_num_batched_tokens, block)
        per_kind.append((kind, g, window))
    return VllmPool(block, page, group_size, groups, pages, tuple(per_kind))


def llama_cpp_cells(
    window: int, context: int, n_ubatch: int, n_seq: int = 1, swa_full: bool = False
) -> int:
    """Cells llama.cpp gives one layer of a cache of ``context`` cells [cells].

    A full layer (``window`` 0) keeps the context padded to 256; a sliding or
    chunked layer ``PAD(min(context, window x n_seq + n_ubatch), 256)``, or the
    whole context with ``swa_full``. ``n_seq`` counts the sequences sharing a
    unified cache (1 for a slot of its own).
    """
    base = _pad(context, LLAMA_CPP_PAD)
    if not window or swa_full:
        return base
    return min(base, _pad(min(base, window * n_seq + n_ubatch), LLAMA_CPP_PAD))


def llama_cpp_request_bytes(
    arch: ModelArch, kv_bytes_per_element: float, context: int, n_ubatch: int
) -> int:
    """Cache one llama.cpp slot of ``context`` tokens holds [bytes].

    Full layers keep the padded context; windowed layers keep
    ``PAD(min(context, window + n_ubatch), 256)`` cells (``swa_full`` off);
    recurrent layers one float32 state.

    Examples
    --------
    gpt-oss-20b at 8192 tokens: 12 full layers of 8192 cells and 12 sliding
    layers of PAD(128 + 512, 256) = 768 cells.

    >>> llama_cpp_cells(128, 8192, 512)
    768
    """
    a = arch.attention
    per_token = token_bytes_per_layer(a, kv_bytes_per_element)
    cells = sum(llama_cpp_cells(w, context, n_ubatch) for w in a.window_per_layer)
    state = state_bytes_per_layer(arch, LLAMA_CPP_STATE_BYTES)
    layers = arch.recurrent.layers if arch.recurrent is not None else 0
    return math.ceil(per_token * cells + state * layers)
