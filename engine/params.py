"""Parameter counts from architecture dimensions.

These reproduce the tensor shapes of the Hugging Face reference implementations
(``modeling_llama.py``, ``modeling_qwen3_moe.py``, ``modeling_deepseek.py``...), so
that total and active parameters can be checked against published figures.
"""

from __future__ import annotations


def embedding_params(vocab_size: int, hidden_size: int, tied: bool) -> int:
    """Token embedding plus the output head (counted once when tied).

    Parameters
    ----------
    vocab_size : int
        Vocabulary size [tokens].
    hidden_size : int
        Model width [elements].
    tied : bool
        Whether ``lm_head`` shares the embedding matrix.

    Returns
    -------
    int
        Parameters in the embedding and output head.
    """
    return vocab_size * hidden_size * (1 if tied else 2)


def gqa_attention_params(
    hidden_size: int, num_heads: int, num_kv_heads: int, head_dim: int, qkv_bias: bool
) -> int:
    """Q, K, V and output projections of (grouped-query) attention.

    Parameters
    ----------
    hidden_size, num_heads, num_kv_heads, head_dim : int
        Shapes from config.json.
    qkv_bias : bool
        Whether Q, K and V carry a bias (Qwen2 does).

    Returns
    -------
    int
        Parameters of one attention block, norms excluded.
    """
    q = hidden_size * num_heads * head_dim
    kv = 2 * hidden_size * num_kv_heads * head_dim
    out = num_heads * head_dim * hidden_size
    bias = (num_heads + 2 * num_kv_heads) * head_dim if qkv_bias else 0
    return q + kv + out + bias


def mla_attention_params(
    hidden_size: int,
    num_heads: int,
    q_lora_rank: int,
    kv_lora_rank: int,
    qk_nope_head_dim: int,
    qk_rope_head_dim: int,
    v_head_dim: int,
) -> int:
    """Multi-head latent attention (DeepSeek-V2/V3) projections and their norms.

    ``q_lora_rank`` of 0 means queries are projected directly (DeepSeek-V2-Lite).

    References
    ----------
    DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
    Language Model", arXiv:2405.04434, section 2.1.
    """
    qk_head = qk_nope_head_dim + qk_rope_head_dim
    if q_lora_rank:
        q = hidden_size * q_lora_rank + q_lora_rank + q_lora_rank * num_heads * qk_head
    else:
        q = hidden_size * num_heads * qk_head
    kv_down = hidden_size * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank
    kv_up = kv_lora_rank * num_heads * (qk_nope_head_dim + v_head_dim)
    out = num_heads * v_head_dim * hidden_size
    return q + kv_down + kv_up + out


def gated_mlp_params(hidden_size: int, intermediate_size: int) -> int:
    """Gate, up and down projections of a SwiGLU/GeGLU MLP (no biases)."""
    return 3 * hidden_size * intermediate_size
