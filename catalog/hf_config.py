"""Parse a Hugging Face ``config.json`` (as a dict) into an engine ``ModelArch``.

The catalog's model entries and ``backpressure estimate --model-config`` both go
through :func:`parse_config`, so a file read offline is costed exactly like a
catalog model. Defaults for keys a config may omit are those of the matching
``transformers`` configuration class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from backpressure.catalog import hf_hybrid
from backpressure.catalog.config_bounds import (
    ConfigError,
    config_shape_problem,
    read_config_json,
    show,
)
from backpressure.catalog.hf_fields import (
    Layer,
    assemble,
    bool_,
    experts_per_token,
    gqa_attention,
    gqa_params,
    head_dim,
    int_,
    int_list,
    kv_heads,
    moe_mlp,
)
from backpressure.engine.arch import Attention, Experts, ModelArch
from backpressure.engine.params import gated_mlp_params, mla_attention_params

__all__ = ["PARSERS", "ConfigError", "config_shape_problem", "parse_config", "read_config_json"]

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


def _windows(cfg: Mapping[str, Any], layers: int, family: str) -> tuple[int, ...]:
    """Sliding window of every layer (0 = global attention)."""
    window = int_(cfg, "sliding_window", 0) if cfg.get("sliding_window") is not None else 0
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers and window:
        return tuple(window if t == "sliding_attention" else 0 for t in layer_types)
    if not window:
        return (0,) * layers
    if family == "qwen":
        if not bool_(cfg, "use_sliding_window", False):
            return (0,) * layers
        first = int_(cfg, "max_window_layers", 0)
        return tuple(window if i >= first else 0 for i in range(layers))
    if family == "gemma2":
        # Gemma 2 alternates: even layers local, odd layers global.
        return tuple(window if i % 2 == 0 else 0 for i in range(layers))
    if family == "gemma3":
        pattern = int_(cfg, "sliding_window_pattern", 6)
        if pattern == 0:
            raise ConfigError("config.json: 'sliding_window_pattern' must be positive")
        return tuple(0 if (i + 1) % pattern == 0 else window for i in range(layers))
    return (window,) * layers


def _gqa_layer(cfg: Mapping[str, Any], qkv_bias: bool, qk_norm: bool, norms: int) -> Layer:
    hidden = int_(cfg, "hidden_size")
    mlp = gated_mlp_params(hidden, int_(cfg, "intermediate_size"))
    return Layer(gqa_params(cfg, qkv_bias, qk_norm), mlp, mlp, norms * hidden)


def _moe_layer(
    cfg: Mapping[str, Any], base: Layer, experts_key: str, intermediate_key: str
) -> tuple[Layer, Experts]:
    hidden = int_(cfg, "hidden_size")
    n = int_(cfg, experts_key)
    k = experts_per_token(cfg, n)
    expert = gated_mlp_params(hidden, int_(cfg, intermediate_key))
    router = hidden * n
    layer = Layer(base.attention, n * expert + router, k * expert + router, base.norms)
    layers = int_(cfg, "num_hidden_layers")
    return layer, Experts(n, k, expert, layers)


def _gqa_attention(cfg: Mapping[str, Any], family: str) -> Attention:
    return gqa_attention(cfg, _windows(cfg, int_(cfg, "num_hidden_layers"), family))


def _dense(family: str, qkv_bias: bool, qk_norm: bool, norms: int, tied: bool) -> _Parser:
    def parse(cfg: Mapping[str, Any]) -> ModelArch:
        layer = _gqa_layer(cfg, qkv_bias, qk_norm, norms)
        layers = [layer] * int_(cfg, "num_hidden_layers")
        return assemble(cfg, layers, _gqa_attention(cfg, family), None, tied)

    return parse


def _parse_mixtral(cfg: Mapping[str, Any]) -> ModelArch:
    base = _gqa_layer(cfg, qkv_bias=False, qk_norm=False, norms=2)
    layer, experts = _moe_layer(cfg, base, "num_local_experts", "intermediate_size")
    layers = [layer] * int_(cfg, "num_hidden_layers")
    return assemble(cfg, layers, _gqa_attention(cfg, "mistral"), experts, tied_default=False)


def _parse_qwen3_moe(cfg: Mapping[str, Any]) -> ModelArch:
    base = _gqa_layer({**cfg, "intermediate_size": cfg.get("intermediate_size", 0)}, False, True, 2)
    layer, experts = _moe_layer(cfg, base, "num_experts", "moe_intermediate_size")
    n_layers = int_(cfg, "num_hidden_layers")
    dense_only = set(int_list(cfg, "mlp_only_layers"))
    step = int_(cfg, "decoder_sparse_step", 1) or 1
    is_moe = [i not in dense_only and (i + 1) % step == 0 for i in range(n_layers)]
    layers = [layer if moe else base for moe in is_moe]
    experts = Experts(
        experts.num_experts, experts.experts_per_token, experts.expert_params, sum(is_moe)
    )
    return assemble(cfg, layers, _gqa_attention(cfg, "qwen"), experts, tied_default=False)


def _parse_deepseek(cfg: Mapping[str, Any]) -> ModelArch:
    hidden = int_(cfg, "hidden_size")
    heads = int_(cfg, "num_attention_heads")
    kv_rank = int_(cfg, "kv_lora_rank")
    rope = int_(cfg, "qk_rope_head_dim")
    attention = mla_attention_params(
        hidden,
        heads,
        int_(cfg, "q_lora_rank", 0) if cfg.get("q_lora_rank") else 0,
        kv_rank,
        int_(cfg, "qk_nope_head_dim"),
        rope,
        int_(cfg, "v_head_dim"),
    )
    n_layers = int_(cfg, "num_hidden_layers")
    n_experts = int_(cfg, "n_routed_experts")
    k = experts_per_token(cfg, n_experts)
    expert = gated_mlp_params(hidden, int_(cfg, "moe_intermediate_size"))
    shared = int_(cfg, "n_shared_experts", 0) * expert
    # V3's router keeps a per-expert score-correction bias (topk_method noaux_tc).
    router = hidden * n_experts + (n_experts if cfg.get("topk_method") == "noaux_tc" else 0)
    dense_mlp = gated_mlp_params(hidden, int_(cfg, "intermediate_size"))
    dense = Layer(attention, dense_mlp, dense_mlp, 2 * hidden)
    moe = Layer(
        attention, n_experts * expert + shared + router, k * expert + shared + router, 2 * hidden
    )
    first_dense = int_(cfg, "first_k_dense_replace", 0)
    freq = int_(cfg, "moe_layer_freq", 1) or 1
    is_moe = [i >= first_dense and i % freq == 0 for i in range(n_layers)]
    layers = [moe if m else dense for m in is_moe]
    attn = Attention(
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=int_(cfg, "v_head_dim"),
        window_per_layer=(0,) * n_layers,
        mla_latent_dim=kv_rank + rope,
    )
    experts = Experts(n_experts, k, expert, sum(is_moe), shared_params_per_layer=shared)
    # Multi-token-prediction layers (num_nextn_predict_layers) ship in the checkpoint
    # but serving runtimes do not load them by default, so they are not counted.
    return assemble(cfg, layers, attn, experts, tied_default=False)


def _parse_glm4_moe(cfg: Mapping[str, Any]) -> ModelArch:
    """GLM-4.5 (Glm4MoeForCausalLM): GQA with q/k/v biases, DeepSeek-style MoE.

    transformers ``modeling_glm4_moe.py``: ``first_k_dense_replace`` dense layers,
    then routed experts of ``moe_intermediate_size`` plus ``n_shared_experts``
    shared ones, a sigmoid router with a per-expert ``e_score_correction_bias``;
    ``use_qk_norm`` adds per-head q/k norms. The MTP layer
    (``num_nextn_predict_layers``) is not loaded for serving and is not counted.
    """
    hidden = int_(cfg, "hidden_size")
    attention = gqa_params(
        cfg, bool(cfg.get("attention_bias", False)), bool(cfg.get("use_qk_norm"))
    )
    n_layers = int_(cfg, "num_hidden_layers")
    n = int_(cfg, "n_routed_experts")
    k = experts_per_token(cfg, n)
    expert = gated_mlp_params(hidden, int_(cfg, "moe_intermediate_size"))
    shared = int_(cfg, "n_shared_experts", 0) * expert
    router = hidden * n + n
    dense_mlp = gated_mlp_params(hidden, int_(cfg, "intermediate_size"))
    dense = Layer(attention, dense_mlp, dense_mlp, 2 * hidden)
    moe = Layer(attention, n * expert + shared + router, k * expert + shared + router, 2 * hidden)
    first_dense = int_(cfg, "first_k_dense_replace", 0)
    layers = [dense if i < first_dense else moe for i in range(n_layers)]
    experts = Experts(n, k, expert, n_layers - min(first_dense, n_layers), shared)
    return assemble(cfg, layers, _gqa_attention(cfg, "glm"), experts, tied_default=False)


def _parse_minimax_m2(cfg: Mapping[str, Any]) -> ModelArch:
    """MiniMax-M2 (MiniMaxM2ForCausalLM): Mixtral's layout with q/k norms and a router bias.

    transformers ``modeling_minimax_m2.py``: every layer routes to
    ``num_local_experts`` SwiGLU experts of ``intermediate_size`` (there is no
    dense MLP and no shared expert), a sigmoid router with a per-expert
    ``e_score_correction_bias``, and full grouped-query attention whose q and k
    are RMS-normed. The MTP modules (``num_mtp_modules``) are not loaded for
    serving and are not counted.
    """
    hidden = int_(cfg, "hidden_size")
    # per-layer q/k norms span every head (qk_norm_type per_layer), not one head's width
    norms = (int_(cfg, "num_attention_heads") + kv_heads(cfg)) * head_dim(cfg)
    n = int_(cfg, "num_local_experts")
    k = experts_per_token(cfg, n)
    expert = gated_mlp_params(hidden, int_(cfg, "intermediate_size"))
    total, active = moe_mlp(hidden, n, k, expert, 0, hidden * n + n)  # router and its bias
    n_layers = int_(cfg, "num_hidden_layers")
    layer = Layer(gqa_params(cfg, False, False) + norms, total, active, 2 * hidden)
    experts = Experts(n, k, expert, n_layers)
    return assemble(
        cfg, [layer] * n_layers, _gqa_attention(cfg, "mistral"), experts, tied_default=False
    )


def _parse_gemma3(cfg: Mapping[str, Any]) -> ModelArch:
    text = cfg.get("text_config")
    merged = {**GEMMA3_TEXT_DEFAULTS, **(text if isinstance(text, Mapping) else cfg)}
    merged.setdefault("torch_dtype", cfg.get("torch_dtype"))
    if "tie_word_embeddings" in cfg and not isinstance(text, Mapping):
        merged["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    layer = _gqa_layer(merged, qkv_bias=False, qk_norm=True, norms=4)
    layers = [layer] * int_(merged, "num_hidden_layers")
    return assemble(merged, layers, _gqa_attention(merged, "gemma3"), None, tied_default=True)


def _parse_mistral3(cfg: Mapping[str, Any]) -> ModelArch:
    """Mistral Small 3.1/3.2 (Mistral3ForConditionalGeneration): the language model.

    The text model is a Mistral under ``text_config``; the file gives the dtype at
    the top level only. As for Gemma 3, the Pixtral vision tower is not counted.
    """
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        raise ConfigError("config.json: 'text_config' is required for mistral3")
    merged = dict(text)
    merged.setdefault("torch_dtype", cfg.get("torch_dtype"))
    if "tie_word_embeddings" in cfg:
        merged.setdefault("tie_word_embeddings", cfg["tie_word_embeddings"])
    return PARSERS["mistral"](merged)


_Parser = Callable[[Mapping[str, Any]], ModelArch]

# Explicit registry: model_type -> parser. Nothing registers by import side effect.
PARSERS: dict[str, _Parser] = {
    "llama": _dense("llama", qkv_bias=False, qk_norm=False, norms=2, tied=False),
    "mistral": _dense("mistral", qkv_bias=False, qk_norm=False, norms=2, tied=False),
    "mistral3": _parse_mistral3,
    "qwen2": _dense("qwen", qkv_bias=True, qk_norm=False, norms=2, tied=False),
    "qwen3": _dense("qwen", qkv_bias=False, qk_norm=True, norms=2, tied=False),
    "phi3": _dense("phi3", qkv_bias=False, qk_norm=False, norms=2, tied=False),
    "gemma2": _dense("gemma2", qkv_bias=False, qk_norm=False, norms=4, tied=True),
    "gemma3": _parse_gemma3,
    "gemma3_text": _parse_gemma3,
    "mixtral": _parse_mixtral,
    "qwen3_moe": _parse_qwen3_moe,
    "minimax_m2": _parse_minimax_m2,
    "deepseek_v2": _parse_deepseek,
    "deepseek_v3": _parse_deepseek,
    # Kimi K2 ships DeepseekV3ForCausalLM under its own model_type (remote code).
    "kimi_k2": _parse_deepseek,
    "glm4_moe": _parse_glm4_moe,
    "gpt_oss": hf_hybrid.parse_gpt_oss,
    "llama4": hf_hybrid.parse_llama4,
    "llama4_text": hf_hybrid.parse_llama4,
    "qwen3_next": hf_hybrid.parse_qwen3_next,
    "granitemoehybrid": hf_hybrid.parse_granite_hybrid,
    "nemotron_h": hf_hybrid.parse_nemotron_h,
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
