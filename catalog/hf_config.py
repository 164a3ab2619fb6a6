"""Parse a Hugging Face ``config.json`` (as a dict) into an engine ``ModelArch``.

The catalog's model entries and ``backpressure estimate --model-config`` both go
through :func:`parse_config`, so a file read offline is costed exactly like a
catalog model. Defaults for keys a config may omit are those of the matching
``transformers`` configuration class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from backpressure.catalog.config_bounds import (
    DEFAULT_MAX,
    LIMITS,
    POSITIVE,
    ConfigError,
    config_shape_problem,
    read_config_json,
    show,
)
from backpressure.engine.arch import Attention, Experts, ModelArch
from backpressure.engine.params import (
    embedding_params,
    gated_mlp_params,
    gqa_attention_params,
    mla_attention_params,
)

__all__ = ["ConfigError", "config_shape_problem", "parse_config", "read_config_json"]

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}

# Keys transformers fills in when a Gemma 3 text config omits them
# (transformers/models/gemma3/configuration_gemma3.py, Gemma3TextConfig defaults).
GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "tie_word_embeddings": True,
}


@dataclass(frozen=True, slots=True)
class _Layer:
    """Per-layer parameter counts (total and active) and norms."""

    attention: int
    mlp_total: int
    mlp_active: int
    norms: int


def _get(cfg: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = cfg.get(key, default)
    if value is None and default is None:
        raise ConfigError(f"config.json: missing key '{key}'")
    return value


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = _get(cfg, key, default)
    low, high = (1 if key in POSITIVE else 0), LIMITS.get(key, DEFAULT_MAX)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(
            f"config.json: '{key}' must be an integer from {low} to {high:,}, got {show(value)}"
        )
    return value


def _bool(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    """A true/false key: the JSON literals only (the string "false" is not false)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"config.json: '{key}' must be true or false, got {show(value)}")
    return value


def _int_list(cfg: Mapping[str, Any], key: str) -> list[int]:
    value = cfg.get(key) or []
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= DEFAULT_MAX for v in value
    ):
        raise ConfigError(f"config.json: '{key}' must be a list of non-negative integers")
    return value


def _head_dim(cfg: Mapping[str, Any]) -> int:
    heads = _int(cfg, "num_attention_heads")
    if cfg.get("head_dim") is not None:
        return _int(cfg, "head_dim")
    return _int(cfg, "hidden_size") // heads


def _kv_heads(cfg: Mapping[str, Any], heads: int) -> int:
    kv_heads = _int(cfg, "num_key_value_heads", heads)
    if kv_heads > heads:
        raise ConfigError(
            f"config.json: 'num_key_value_heads' ({kv_heads}) exceeds the attention heads ({heads})"
        )
    return kv_heads


def _windows(cfg: Mapping[str, Any], layers: int, family: str) -> tuple[int, ...]:
    """Sliding window of every layer (0 = global attention)."""
    window = _int(cfg, "sliding_window", 0) if cfg.get("sliding_window") is not None else 0
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers and window:
        return tuple(window if t == "sliding_attention" else 0 for t in layer_types)
    if not window:
        return (0,) * layers
    if family == "qwen":
        if not _bool(cfg, "use_sliding_window", False):
            return (0,) * layers
        first = _int(cfg, "max_window_layers", 0)
        return tuple(window if i >= first else 0 for i in range(layers))
    if family == "gemma2":
        # Gemma 2 alternates: even layers local, odd layers global.
        return tuple(window if i % 2 == 0 else 0 for i in range(layers))
    if family == "gemma3":
        pattern = _int(cfg, "sliding_window_pattern", 6)
        if pattern == 0:
            raise ConfigError("config.json: 'sliding_window_pattern' must be positive")
        return tuple(0 if (i + 1) % pattern == 0 else window for i in range(layers))
    return (window,) * layers


def _gqa_layer(cfg: Mapping[str, Any], qkv_bias: bool, qk_norm: bool, norms: int) -> _Layer:
    hidden = _int(cfg, "hidden_size")
    head_dim = _head_dim(cfg)
    heads = _int(cfg, "num_attention_heads")
    kv_heads = _kv_heads(cfg, heads)
    attention = gqa_attention_params(hidden, heads, kv_heads, head_dim, qkv_bias)
    attention += 2 * head_dim if qk_norm else 0
    mlp = gated_mlp_params(hidden, _int(cfg, "intermediate_size"))
    return _Layer(attention, mlp, mlp, norms * hidden)


def _experts_per_token(cfg: Mapping[str, Any], experts: int) -> int:
    k = _int(cfg, "num_experts_per_tok")
    if k == 0 or k > experts:
        raise ConfigError("config.json: 'num_experts_per_tok' must be between 1 and the experts")
    return k


def _moe_layer(
    cfg: Mapping[str, Any], base: _Layer, experts_key: str, intermediate_key: str
) -> tuple[_Layer, Experts]:
    hidden = _int(cfg, "hidden_size")
    n = _int(cfg, experts_key)
    k = _experts_per_token(cfg, n)
    expert = gated_mlp_params(hidden, _int(cfg, intermediate_key))
    router = hidden * n
    layer = _Layer(base.attention, n * expert + router, k * expert + router, base.norms)
    layers = _int(cfg, "num_hidden_layers")
    return layer, Experts(n, k, expert, layers)


def _assemble(
    cfg: Mapping[str, Any],
    layers: list[_Layer],
    attention: Attention,
    experts: Experts | None,
    tied_default: bool,
) -> ModelArch:
    hidden = _int(cfg, "hidden_size")
    vocab = _int(cfg, "vocab_size")
    tied = _bool(cfg, "tie_word_embeddings", tied_default)
    embed = embedding_params(vocab, hidden, tied)
    shared = sum(lay.attention + lay.norms for lay in layers) + embed + hidden
    total = shared + sum(lay.mlp_total for lay in layers)
    active = shared + sum(lay.mlp_active for lay in layers)
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    if not isinstance(dtype, str):
        raise ConfigError(f"config.json: 'torch_dtype' must be a string, got {show(dtype)}")
    return ModelArch(
        name=str(cfg.get("_name_or_path") or cfg.get("model_type"))[:200],
        num_layers=len(layers),
        hidden_size=hidden,
        vocab_size=vocab,
        max_context=_int(cfg, "max_position_embeddings"),
        dtype_bytes=DTYPE_BYTES.get(dtype, 2),
        attention=attention,
        total_params=total,
        active_params=active,
        experts=experts,
        intermediate_size=_int(cfg, "intermediate_size", 0),
        embedding_params=embed,
        lookup_only_params=0 if tied else vocab * hidden,
    )


def _gqa_attention(cfg: Mapping[str, Any], family: str) -> Attention:
    layers = _int(cfg, "num_hidden_layers")
    heads = _int(cfg, "num_attention_heads")
    return Attention(
        num_heads=heads,
        num_kv_heads=_kv_heads(cfg, heads),
        head_dim=_head_dim(cfg),
        window_per_layer=_windows(cfg, layers, family),
    )


def _dense(family: str, qkv_bias: bool, qk_norm: bool, norms: int, tied: bool) -> _Parser:
    def parse(cfg: Mapping[str, Any]) -> ModelArch:
        layer = _gqa_layer(cfg, qkv_bias, qk_norm, norms)
        layers = [layer] * _int(cfg, "num_hidden_layers")
        return _assemble(cfg, layers, _gqa_attention(cfg, family), None, tied)

    return parse


def _parse_mixtral(cfg: Mapping[str, Any]) -> ModelArch:
    base = _gqa_layer(cfg, qkv_bias=False, qk_norm=False, norms=2)
    layer, experts = _moe_layer(cfg, base, "num_local_experts", "intermediate_size")
    layers = [layer] * _int(cfg, "num_hidden_layers")
    return _assemble(cfg, layers, _gqa_attention(cfg, "mistral"), experts, tied_default=False)


def _parse_qwen3_moe(cfg: Mapping[str, Any]) -> ModelArch:
    base = _gqa_layer({**cfg, "intermediate_size": cfg.get("intermediate_size", 0)}, False, True, 2)
    layer, experts = _moe_layer(cfg, base, "num_experts", "moe_intermediate_size")
    n_layers = _int(cfg, "num_hidden_layers")
    dense_only = set(_int_list(cfg, "mlp_only_layers"))
    step = _int(cfg, "decoder_sparse_step", 1) or 1
    is_moe = [i not in dense_only and (i + 1) % step == 0 for i in range(n_layers)]
    layers = [layer if moe else base for moe in is_moe]
    experts = Experts(
        experts.num_experts, experts.experts_per_token, experts.expert_params, sum(is_moe)
    )
    return _assemble(cfg, layers, _gqa_attention(cfg, "qwen"), experts, tied_default=False)


def _parse_deepseek(cfg: Mapping[str, Any]) -> ModelArch:
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    kv_rank = _int(cfg, "kv_lora_rank")
    rope = _int(cfg, "qk_rope_head_dim")
    attention = mla_attention_params(
        hidden,
        heads,
        _int(cfg, "q_lora_rank", 0) if cfg.get("q_lora_rank") else 0,
        kv_rank,
        _int(cfg, "qk_nope_head_dim"),
        rope,
        _int(cfg, "v_head_dim"),
    )
    n_layers = _int(cfg, "num_hidden_layers")
    n_experts = _int(cfg, "n_routed_experts")
    k = _experts_per_token(cfg, n_experts)
    expert = gated_mlp_params(hidden, _int(cfg, "moe_intermediate_size"))
    shared = _int(cfg, "n_shared_experts", 0) * expert
    # V3's router keeps a per-expert score-correction bias (topk_method noaux_tc).
    router = hidden * n_experts + (n_experts if cfg.get("topk_method") == "noaux_tc" else 0)
    dense_mlp = gated_mlp_params(hidden, _int(cfg, "intermediate_size"))
    dense = _Layer(attention, dense_mlp, dense_mlp, 2 * hidden)
    moe = _Layer(
        attention, n_experts * expert + shared + router, k * expert + shared + router, 2 * hidden
    )
    first_dense = _int(cfg, "first_k_dense_replace", 0)
    freq = _int(cfg, "moe_layer_freq", 1) or 1
    is_moe = [i >= first_dense and i % freq == 0 for i in range(n_layers)]
    layers = [moe if m else dense for m in is_moe]
    attn = Attention(
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=_int(cfg, "v_head_dim"),
        window_per_layer=(0,) * n_layers,
        mla_latent_dim=kv_rank + rope,
    )
    experts = Experts(n_experts, k, expert, sum(is_moe), shared_params_per_layer=shared)
    # Multi-token-prediction layers (num_nextn_predict_layers) ship in the checkpoint
    # but serving runtimes do not load them by default, so they are not counted.
    return _assemble(cfg, layers, attn, experts, tied_default=False)


def _parse_gemma3(cfg: Mapping[str, Any]) -> ModelArch:
    text = cfg.get("text_config")
    merged = {**GEMMA3_TEXT_DEFAULTS, **(text if isinstance(text, Mapping) else cfg)}
    merged.setdefault("torch_dtype", cfg.get("torch_dtype"))
    if "tie_word_embeddings" in cfg and not isinstance(text, Mapping):
        merged["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    layer = _gqa_layer(merged, qkv_bias=False, qk_norm=True, norms=4)
    layers = [layer] * _int(merged, "num_hidden_layers")
    return _assemble(merged, layers, _gqa_attention(merged, "gemma3"), None, tied_default=True)


_Parser = Callable[[Mapping[str, Any]], ModelArch]

# Explicit registry: model_type -> parser. Nothing registers by import side effect.
PARSERS: dict[str, _Parser] = {
    "llama": _dense("llama", qkv_bias=False, qk_norm=False, norms=2, tied=False),
    "mistral": _dense("mistral", qkv_bias=False, qk_norm=False, norms=2, tied=False),
    "qwen2": _dense("qwen", qkv_bias=True, qk_norm=False, norms=2, tied=False),
    "qwen3": _dense("qwen", qkv_bias=False, qk_norm=True, norms=2, tied=False),
    "phi3": _dense("phi3", qkv_bias=False, qk_norm=False, norms=2, tied=False),
    "gemma2": _dense("gemma2", qkv_bias=False, qk_norm=False, norms=4, tied=True),
    "gemma3": _parse_gemma3,
    "gemma3_text": _parse_gemma3,
    "mixtral": _parse_mixtral,
    "qwen3_moe": _parse_qwen3_moe,
    "deepseek_v2": _parse_deepseek,
    "deepseek_v3": _parse_deepseek,
}


def parse_config(cfg: Mapping[str, Any]) -> ModelArch:
    """Turn a config.json mapping into a :class:`ModelArch`.

    Raises
    ------
    ConfigError
        For an unsupported ``model_type`` or a missing or malformed key.
    """
    problem = config_shape_problem(cfg)
    if problem:
        raise ConfigError(f"config.json: {problem}")
    model_type = cfg.get("model_type")
    parser = PARSERS.get(model_type) if isinstance(model_type, str) else None
    if parser is None:
        supported = ", ".join(sorted(PARSERS))
        raise ConfigError(
            f"config.json: unsupported model_type {show(model_type)} (supported: {supported})"
        )
    arch = parser(cfg)
    if arch.num_layers == 0 or arch.hidden_size == 0:
        raise ConfigError("config.json: a model needs at least one layer and a hidden size")
    return arch
