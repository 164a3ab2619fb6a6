"""KV-cache cost per token and per request.

Exact from the architecture where it is known:
``2 x layers x kv_heads x head_dim x bytes_per_element`` for (grouped-query)
attention, the latent width for multi-head latent attention, and sliding-window
layers capped at their window. Only a bare parameter count falls back to the
grouped-query heuristic.
"""

from __future__ import annotations

import math

from backpressure.engine.arch import Attention
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

    >>> from engine.arch import Attention
    >>> kv_bytes_per_token(Attention(32, 8, 128, (0,) * 32), 2)
    131072
    """
    per_layer = kv_bytes_per_token_layer(attention, bytes_per_element)
    return math.ceil(per_layer * len(attention.window_per_layer))


def kv_bytes_per_request(attention: Attention, bytes_per_element: float, context: int) -> int:
    """Cache held by one request of ``context`` tokens [bytes].

    Sliding-window layers hold at most their window; global layers hold the
    whole context.
    """
    per_layer = kv_bytes_per_token_layer(attention, bytes_per_element)
    held = sum(min(context, w) if w else context for w in attention.window_per_layer)
    return math.ceil(per_layer * held)


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
