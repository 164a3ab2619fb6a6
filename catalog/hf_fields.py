"""Reading config.json fields, and assembling per-layer counts into a ``ModelArch``.

Shared by the parsers in :mod:`backpressure.catalog.hf_config` and
:mod:`backpressure.catalog.hf_hybrid`. Every missing or malformed key raises
:class:`ConfigError` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from backpressure.catalog.config_bounds import DEFAULT_MAX, LIMITS, POSITIVE, ConfigError, show
from backpressure.engine.arch import Attention, Experts, ModelArch, Recurrent
from backpressure.engine.params import embedding_params, gated_mlp_params, gqa_attention_params

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}


@dataclass(frozen=True, slots=True)
class Layer:
    """Per-layer parameter counts (total and active) and norms."""

    attention: int
    mlp_total: int
    mlp_active: int
    norms: int


def get(cfg: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """A key's value, or ``default``; a missing key without a default is an error."""
    value = cfg.get(key, default)
    if value is None and default is None:
        raise ConfigError(f"config.json: missing key '{key}'")
    return value


def int_(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    """An integer key inside its bounds (:mod:`backpressure.catalog.config_bounds`)."""
    value = get(cfg, key, default)
    low, high = (1 if key in POSITIVE else 0), LIMITS.get(key, DEFAULT_MAX)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(
            f"config.json: '{key}' must be an integer from {low} to {high:,}, got {show(value)}"
        )
    return value


def bool_(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    """A true/false key: the JSON literals only (the string "false" is not false)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"config.json: '{key}' must be true or false, got {show(value)}")
    return value


def int_list(cfg: Mapping[str, Any], key: str) -> list[int]:
    """A list of integers (empty when the key is absent or null)."""
    value = cfg.get(key) or []
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= DEFAULT_MAX for v in value
    ):
        raise ConfigError(f"config.json: '{key}' must be a list of non-negative integers")
    return value


def str_list(cfg: Mapping[str, Any], key: str, length: int) -> list[str] | None:
    """A list of ``length`` strings, or None when the key is absent."""
    value = cfg.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != length
        or not all(isinstance(v, str) for v in value)
    ):
        raise ConfigError(f"config.json: '{key}' must list one string per layer ({length})")
    return value


def head_dim(cfg: Mapping[str, Any]) -> int:
    """``head_dim`` if given, else ``hidden_size / num_attention_heads``."""
    heads = int_(cfg, "num_attention_heads")
    if heads == 0:
        raise ConfigError("config.json: 'num_attention_heads' must be positive")
    if cfg.get("head_dim") is not None:
        return int_(cfg, "head_dim")
    return int_(cfg, "hidden_size") // heads


def kv_heads(cfg: Mapping[str, Any]) -> int:
    """``num_key_value_heads`` (default: one per attention head), at most the heads."""
    heads = int_(cfg, "num_attention_heads")
    kv = int_(cfg, "num_key_value_heads", heads)
    if kv > heads:
        raise ConfigError(
            f"config.json: 'num_key_value_heads' ({kv}) exceeds the attention heads ({heads})"
        )
    return kv


def experts_per_token(cfg: Mapping[str, Any], experts: int) -> int:
    """``num_experts_per_tok``, checked against the expert count."""
    k = int_(cfg, "num_experts_per_tok")
    if k == 0 or k > experts:
        raise ConfigError("config.json: 'num_experts_per_tok' must be between 1 and the experts")
    return k


def gqa_params(cfg: Mapping[str, Any], qkv_bias: bool, qk_norm: bool) -> int:
    """One grouped-query attention block (plus per-head q/k norms when present)."""
    hidden = int_(cfg, "hidden_size")
    dim = head_dim(cfg)
    heads = int_(cfg, "num_attention_heads")
    return gqa_attention_params(hidden, heads, kv_heads(cfg), dim, qkv_bias) + (
        2 * dim if qk_norm else 0
    )


def gqa_attention(cfg: Mapping[str, Any], windows: tuple[int, ...], **extra: Any) -> Attention:
    """The KV shape of a grouped-query model with the given per-layer windows."""
    heads = int_(cfg, "num_attention_heads")
    return Attention(
        num_heads=heads,
        num_kv_heads=kv_heads(cfg),
        head_dim=head_dim(cfg),
        window_per_layer=windows,
        **extra,
    )


def moe_mlp(hidden: int, n: int, k: int, expert: int, shared: int, router: int) -> tuple[int, int]:
    """(total, active) parameters of one MoE block: experts, shared experts, router."""
    return n * expert + shared + router, k * expert + shared + router


def dense_mlp(hidden: int, intermediate: int) -> int:
    """A SwiGLU MLP."""
    return gated_mlp_params(hidden, intermediate)


def assemble(
    cfg: Mapping[str, Any],
    layers: list[Layer],
    attention: Attention,
    experts: Experts | None,
    tied_default: bool,
    recurrent: Recurrent | None = None,
    name_cfg: Mapping[str, Any] | None = None,
) -> ModelArch:
    """Sum the layers, add embeddings and the final norm, and build the ``ModelArch``."""
    hidden = int_(cfg, "hidden_size")
    vocab = int_(cfg, "vocab_size")
    tied = bool_(cfg, "tie_word_embeddings", tied_default)
    embed = embedding_params(vocab, hidden, tied)
    shared = sum(lay.attention + lay.norms for lay in layers) + embed + hidden
    total = shared + sum(lay.mlp_total for lay in layers)
    active = shared + sum(lay.mlp_active for lay in layers)
    top = name_cfg if name_cfg is not None else cfg
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or top.get("torch_dtype") or "bfloat16"
    if not isinstance(dtype, str):
        raise ConfigError(f"config.json: 'torch_dtype' must be a string, got {show(dtype)}")
    return ModelArch(
        name=str(top.get("_name_or_path") or top.get("model_type"))[:200],
        num_layers=len(layers),
        hidden_size=hidden,
        vocab_size=vocab,
        max_context=int_(cfg, "max_position_embeddings"),
        dtype_bytes=DTYPE_BYTES.get(dtype, 2),
        attention=attention,
        total_params=total,
        active_params=active,
        experts=experts,
        intermediate_size=int_(cfg, "intermediate_size", 0),
        embedding_params=embed,
        lookup_only_params=0 if tied else vocab * hidden,
        recurrent=recurrent,
    )
