"""KV-cache cost per token and per request: what a request needs.

Exact from the architecture where it is known:
``2 x layers x kv_heads x head_dim x bytes_per_element`` for (grouped-query)
attention, the latent width for multi-head latent attention, sliding-window
layers capped at their window, chunked local layers at their chunk, and
linear-attention and Mamba layers at a fixed state per sequence. Attention
sinks live in the weights and cost nothing here. Only a bare parameter count
falls back to the grouped-query heuristic.

For a hybrid model ``kv_bytes_per_token`` is the per-token cost of the layers
that cache keys and values, before any window: the bytes one more token of
context costs a request whose windows are already full is smaller (only the
full layers grow), and the recurrent layers add nothing per token.
``kv_bytes_per_request`` is the attention cache one request holds;
:func:`cache_bytes_per_request` adds the recurrent state. What a runtime
charges on top (vLLM's pages, llama.cpp's padding) is in
:mod:`backpressure.engine.kv_pool`.
"""

from __future__ import annotations

import math

from backpressure.engine.arch import Attention, ModelArch
from backpressure.engine.units import MIB


def kv_bytes_per_token_layer(attention: Attention, bytes_per_element: float) -> float:
    """Cache cost of one token in one layer [bytes].

    Parameters
    ----------
    attention : Attention
        Head counts and sizes.
    bytes_per_element : float
        Storage per cached element, block scales included [bytes]
        (2 for f16/bf16, 1 for fp8, 34/32 for q8_0, 18/32 for q4_0).

    Returns
    -------
    float
        Bytes; MLA keeps one latent vector (``kv_lora_rank + qk_rope_head_dim``
        elements), GQA keeps a key and a value per KV head.

    References
    ----------
    DeepSeek-AI, arXiv:2405.04434, section 2.1.4 (MLA cache of
    ``(d_c + d_h^R) x l`` elements per token).
    """
    if attention.mla_latent_dim:
        return attention.mla_latent_dim * bytes_per_element
    return 2 * attention.num_kv_heads * attention.head_dim * bytes_per_element


def kv_bytes_per_token(attention: Attention, bytes_per_element: float) -> int:
    """Uncapped cache cost of one token across all layers [bytes], rounded up.

    Examples
    --------
    Llama-3.1-8B (32 layers, 8 KV heads of 128) in bf16:

    >>> from backpressure.engine.arch import Attention
    >>> kv_bytes_per_token(Attention(32, 8, 128, (0,) * 32), 2)
    131072
    """
    per_layer = kv_bytes_per_token_layer(attention, bytes_per_element)
    return math.ceil(per_layer * len(attention.window_per_layer))


def kv_bytes_per_request(attention: Attention, bytes_per_element: float, context: int) -> int:
    """Attention cache held by one request of ``context`` tokens [bytes].

    Sliding-window layers hold at most their window, chunked local layers at
    most one chunk; global layers hold the whole context.
    """
    per_layer = kv_bytes_per_token_layer(attention, bytes_per_element)
    held = sum(min(context, w) if w else context for w in attention.window_per_layer)
    return math.ceil(per_layer * held)


def state_bytes_per_request(arch: ModelArch, bytes_per_element: float) -> int:
    """Recurrent state one request holds in linear-attention and Mamba layers [bytes].

    Parameters
    ----------
    arch : ModelArch
        The model; 0 without recurrent layers.
    bytes_per_element : float
        Storage per state element [bytes] (vLLM keeps the model dtype, llama.cpp
        float32).

    Examples
    --------
    Qwen3-Next-80B-A3B in bf16: 36 Gated DeltaNet layers, each a conv window of
    3 x 8192 and a state of 32 x 128 x 128 elements, 2 bytes each:

    >>> from backpressure.engine.arch import Recurrent
    >>> r = Recurrent("linear", 36, 3 * 8192, 32 * 128 * 128)
    >>> r.elements_per_layer * 36 * 2
    39518208
    """
    if arch.recurrent is None:
        return 0
    r = arch.recurrent
    return math.ceil(r.layers * r.elements_per_layer * bytes_per_element)


def vllm_state_bytes_per_request(arch: ModelArch) -> int:
    """Recurrent state one request holds in vLLM [bytes].

    The conv window in the model's dtype; the state in the checkpoint's own dtype
    where it sets one (NemotronH), else the model's.
    """
    if arch.recurrent is None:
        return 0
    r = arch.recurrent
    return r.layers * r.vllm_bytes_per_layer(arch.dtype_bytes)


def cache_bytes_per_request(
    arch: ModelArch, kv_bytes_per_element: float, state_bytes_per_element: float, context: int
) -> int:
    """Everything one request of ``context`` tokens holds: KV cache plus state [bytes]."""
    return kv_bytes_per_request(
        arch.attention, kv_bytes_per_element, context
    ) + state_bytes_per_request(arch, state_bytes_per_element)


def kv_bytes_per_token_heuristic(total_params: int, mib_per_billion: float) -> int:
    """Grouped-query heuristic when only a parameter count is known [bytes/token].

    Parameters
    ----------
    total_params : int
        Parameter count [parameters].
    mib_per_billion : float
        Cache cost per token per billion parameters [MiB]; 0.017 for GQA models.

    Notes
    -----
    Mistral-7B (7.24B, 8 KV heads of 128, 32 layers) costs 0.125 MiB per token in
    f16, i.e. 0.0173 MiB per billion parameters. The older multi-head figure of
    0.07 comes from Llama-2-7B (0.5 MiB per token) and overstates a GQA model's
    cache about fourfold.

    >>> kv_bytes_per_token_heuristic(7_000_000_000, 0.017)
    124781
    """
    return math.ceil(mib_per_billion * MIB * total_params / 1e9)
