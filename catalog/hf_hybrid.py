"""Parsers for models whose layers differ in kind: gpt-oss, Llama 4 and the hybrids.

The hybrids are Qwen3-Next (Gated DeltaNet), Granite 4.0-H and Nemotron-H (Mamba-2).
Each follows the tensor shapes of its Hugging Face implementation
(``modeling_gpt_oss.py``, ``modeling_llama4.py``, ``modeling_qwen3_next.py``,
``modeling_granitemoehybrid.py``, ``modeling_nemotron_h.py``) and the defaults of
its configuration class, so that parameter counts can be checked against
published totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backpressure.catalog.config_bounds import ConfigError
from backpressure.catalog.hf_fields import (
    Layer,
    assemble,
    dense_mlp,
    experts_per_token,
    get,
    gqa_attention,
    gqa_params,
    head_dim,
    int_,
    int_list,
    str_list,
)
from backpressure.engine.arch import Experts, ModelArch, Recurrent


def parse_gpt_oss(cfg: Mapping[str, Any]) -> ModelArch:
    """gpt-oss: alternating sliding-window (``layer_types``) and full layers, MoE everywhere.

    Attention has biases on q, k, v and o, and one learned sink logit per head
    (``sinks``), which the KV cache does not hold. Experts are SwiGLU with
    biases (``gate_up_proj_bias``, ``down_proj_bias``); the router has a bias.
    """
    hidden = int_(cfg, "hidden_size")
    layers_n = int_(cfg, "num_hidden_layers")
    heads = int_(cfg, "num_attention_heads")
    attention = gqa_params(cfg, qkv_bias=True, qk_norm=False) + hidden + heads
    n = int_(cfg, "num_local_experts")
    k = experts_per_token(cfg, n)
    inter = int_(cfg, "intermediate_size")
    expert = dense_mlp(hidden, inter) + 2 * inter + hidden
    router = hidden * n + n
    layer = Layer(attention, n * expert + router, k * expert + router, 2 * hidden)
    window = int_(cfg, "sliding_window", 0)
    types = str_list(cfg, "layer_types", layers_n)
    if types is None:  # transformers GptOssConfig default: sliding on even layers
        types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers_n)]
    windows = tuple(window if t == "sliding_attention" else 0 for t in types)
    return assemble(
        cfg,
        [layer] * layers_n,
        gqa_attention(cfg, windows, sinks=True),
        Experts(n, k, expert, layers_n),
        tied_default=False,
    )


def parse_llama4(cfg: Mapping[str, Any]) -> ModelArch:
    """Llama 4 (``llama4`` with a ``text_config``, or ``llama4_text``).

    transformers ``Llama4TextConfig``: layers with RoPE (``no_rope_layers[i]``
    = 1; by default all but every 4th) use chunked local attention of
    ``attention_chunk_size`` tokens, the NoPE layers attend globally; MoE layers
    are every ``interleave_moe_layer_step``-th (routed experts of
    ``intermediate_size`` plus one shared expert of the same width), the rest
    are dense MLPs of ``intermediate_size_mlp``. The q/k L2 norm has no weights.
    """
    text = cfg.get("text_config")
    tc: Mapping[str, Any] = text if isinstance(text, Mapping) else cfg
    hidden = int_(tc, "hidden_size")
    layers_n = int_(tc, "num_hidden_layers")
    attention = gqa_params(tc, bool(tc.get("attention_bias", False)), qk_norm=False)
    rope = int_list(tc, "no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(layers_n)]
    if len(rope) != layers_n:
        raise ConfigError("config.json: 'no_rope_layers' must have one entry per layer")
    chunk = int_(tc, "attention_chunk_size", 8192)
    windows = tuple(chunk if r else 0 for r in rope)
    step = int_(tc, "interleave_moe_layer_step", 1) or 1
    moe_at = set(int_list(tc, "moe_layers") or range(step - 1, layers_n, step))
    n = int_(tc, "num_local_experts")
    k = experts_per_token(tc, n)
    expert = dense_mlp(hidden, int_(tc, "intermediate_size"))
    router = hidden * n
    moe = Layer(attention, n * expert + expert + router, k * expert + expert + router, 2 * hidden)
    mlp = dense_mlp(hidden, int_(tc, "intermediate_size_mlp", 0))
    dense = Layer(attention, mlp, mlp, 2 * hidden)
    layers = [moe if i in moe_at else dense for i in range(layers_n)]
    experts = Experts(n, k, expert, len(moe_at), shared_params_per_layer=expert)
    attn = gqa_attention(tc, windows, local="chunked")
    return assemble(tc, layers, attn, experts, tied_default=False, name_cfg=cfg)


def _gdn_params(cfg: Mapping[str, Any]) -> tuple[int, Recurrent]:
    """One Gated DeltaNet layer's parameters and its per-sequence state (one layer)."""
    hidden = int_(cfg, "hidden_size")
    k_heads = int_(cfg, "linear_num_key_heads", 16)
    v_heads = int_(cfg, "linear_num_value_heads", 32)
    k_dim = int_(cfg, "linear_key_head_dim", 128)
    v_dim = int_(cfg, "linear_value_head_dim", 128)
    kernel = int_(cfg, "linear_conv_kernel_dim", 4)
    key, value = k_heads * k_dim, v_heads * v_dim
    conv = 2 * key + value
    # in_proj_qkvz, in_proj_ba, depthwise conv1d, dt_bias, A_log, gated norm, out_proj
    params = hidden * (2 * key + 2 * value) + hidden * 2 * v_heads + conv * kernel
    params += 2 * v_heads + v_dim + value * hidden
    state = Recurrent("linear", 1, (kernel - 1) * conv, v_heads * k_dim * v_dim)
    return params, state


def parse_qwen3_next(cfg: Mapping[str, Any]) -> ModelArch:
    """Qwen3-Next: Gated DeltaNet layers, with gated full attention every 4th layer.

    ``layer_types`` (default: ``full_attention`` where ``(i + 1) %
    full_attention_interval == 0``). Gated attention projects queries and an
    output gate (``q_proj`` of twice the query width) and has per-head q/k norms.
    Every layer is MoE with one shared expert behind a scalar gate.
    """
    hidden = int_(cfg, "hidden_size")
    layers_n = int_(cfg, "num_hidden_layers")
    types = str_list(cfg, "layer_types", layers_n)
    if types is None:
        interval = int_(cfg, "full_attention_interval", 4) or 4
        types = [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention"
            for i in range(layers_n)
        ]
    dim = head_dim(cfg)
    heads = int_(cfg, "num_attention_heads")
    gated_attention = gqa_params(cfg, bool(cfg.get("attention_bias", False)), True)
    gated_attention += hidden * heads * dim
    linear, state = _gdn_params(cfg)
    n = int_(cfg, "num_experts")
    k = experts_per_token(cfg, n)
    expert = dense_mlp(hidden, int_(cfg, "moe_intermediate_size"))
    shared = dense_mlp(hidden, int_(cfg, "shared_expert_intermediate_size", 0)) + hidden
    router = hidden * n
    total, active = n * expert + shared + router, k * expert + shared + router
    layers = [
        Layer(gated_attention if t == "full_attention" else linear, total, active, 2 * hidden)
        for t in types
    ]
    n_linear = sum(1 for t in types if t == "linear_attention")
    windows = (0,) * (layers_n - n_linear)
    recurrent = Recurrent("linear", n_linear, state.conv_elements, state.state_elements)
    experts = Experts(n, k, expert, layers_n, shared_params_per_layer=shared)
    return assemble(
        cfg, layers, gqa_attention(cfg, windows), experts, tied_default=False, recurrent=recurrent
    )


def _mamba2_mixer(
    hidden: int,
    heads: int,
    d_head: int,
    groups: int,
    d_state: int,
    d_conv: int,
    conv_bias: bool,
    proj_bias: bool,
) -> tuple[int, int, int]:
    """(parameters, conv-window elements, state elements) of one Mamba-2 mixer."""
    inner = heads * d_head
    conv = inner + 2 * groups * d_state
    # in_proj (z, x, B, C, dt), depthwise conv1d, A_log / D / dt_bias, gated norm, out_proj
    params = hidden * (inner + conv + heads) + conv * d_conv + 3 * heads + inner + inner * hidden
    params += conv if conv_bias else 0
    params += hidden + inner + conv + heads if proj_bias else 0
    return params, (d_conv - 1) * conv, heads * d_head * d_state


def _mamba2(cfg: Mapping[str, Any]) -> tuple[int, Recurrent]:
    """One Mamba-2 mixer's parameters and its per-sequence state (GraniteMoeHybrid)."""
    hidden = int_(cfg, "hidden_size")
    inner = int_(cfg, "mamba_expand", 2) * hidden
    heads = int_(cfg, "mamba_n_heads", 128)
    groups = int_(cfg, "mamba_n_groups", 1)
    d_state = int_(cfg, "mamba_d_state", 256)
    d_conv = int_(cfg, "mamba_d_conv", 4)
    d_head = get(cfg, "mamba_d_head", "auto")
    d_head = inner // heads if d_head == "auto" else int_(cfg, "mamba_d_head")
    params, conv, state = _mamba2_mixer(
        hidden,
        heads,
        d_head,
        groups,
        d_state,
        d_conv,
        bool(cfg.get("mamba_conv_bias", True)),
        bool(cfg.get("mamba_proj_bias", False)),
    )
    return params, Recurrent("mamba", 1, conv, state)


def parse_granite_hybrid(cfg: Mapping[str, Any]) -> ModelArch:
    """Granite 4.0-H (GraniteMoeHybrid): Mamba-2 and attention layers by ``layer_types``.

    Every layer carries a MoE block (``num_local_experts`` experts of
    ``intermediate_size``) plus a shared MLP of ``shared_intermediate_size``;
    with no experts only the shared MLP remains.
    """
    hidden = int_(cfg, "hidden_size")
    layers_n = int_(cfg, "num_hidden_layers")
    types = str_list(cfg, "layer_types", layers_n)
    if types is None:
        raise ConfigError("config.json: 'layer_types' is required for granitemoehybrid")
    attention = gqa_params(cfg, bool(cfg.get("attention_bias", False)), qk_norm=False)
    mixer, state = _mamba2(cfg)
    n = int_(cfg, "num_local_experts", 0)
    shared = dense_mlp(hidden, int_(cfg, "shared_intermediate_size", 1024))
    if n:
        k = experts_per_token(cfg, n)
        expert = dense_mlp(hidden, int_(cfg, "intermediate_size"))
        total, active = n * expert + shared + hidden * n, k * expert + shared + hidden * n
    else:
        k, expert, total, active = 0, 0, shared, shared
    is_attn = [t == "attention" for t in types]
    layers = [Layer(attention if a else mixer, total, active, 2 * hidden) for a in is_attn]
    n_mamba = layers_n - sum(is_attn)
    recurrent = Recurrent("mamba", n_mamba, state.conv_elements, state.state_elements)
    experts = Experts(n, k, expert, layers_n, shared) if n else None
    windows = (0,) * sum(is_attn)
    return assemble(
        cfg, layers, gqa_attention(cfg, windows), experts, tied_default=False, recurrent=recurrent
    )


# vLLM keeps a NemotronH model's Mamba state in the config's ``mamba_ssm_cache_dtype``
# (vllm/model_executor/models/config.py, NemotronHForCausalLMConfig: "Updating
# mamba_ssm_cache_dtype to '%s' for NemotronH model"), float32 where the key is absent.
SSM_CACHE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
NEMOTRON_LAYER_KINDS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def parse_nemotron_h(cfg: Mapping[str, Any]) -> ModelArch:
    """Nemotron-H and Nemotron 3 (NemotronH): one mixer per layer by ``hybrid_override_pattern``.

    ``M`` a Mamba-2 mixer, ``*`` grouped-query attention, ``-`` a squared-ReLU MLP
    (up and down projections, no gate), ``E`` a mixture of such experts with a
    sigmoid router, its correction bias and ``n_shared_experts`` shared experts. The
    Mamba inner width is ``mamba_num_heads`` x ``mamba_head_dim``; one norm per layer.
    """
    hidden = int_(cfg, "hidden_size")
    layers_n = int_(cfg, "num_hidden_layers")
    pattern = get(cfg, "hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != layers_n:
        raise ConfigError(
            "config.json: 'hybrid_override_pattern' must be a string of one character per "
            "layer (num_hidden_layers)"
        )
    kinds = [NEMOTRON_LAYER_KINDS.get(c) for c in pattern]
    if None in kinds:
        raise ConfigError(
            "config.json: 'hybrid_override_pattern' may hold only M (Mamba-2), * (attention), "
            "- (MLP) and E (mixture of experts)"
        )
    mixer, conv, state = _mamba2_mixer(
        hidden,
        int_(cfg, "mamba_num_heads"),
        int_(cfg, "mamba_head_dim"),
        int_(cfg, "n_groups", 1),
        int_(cfg, "ssm_state_size"),
        int_(cfg, "conv_kernel", 4),
        bool(cfg.get("use_conv_bias", True)),
        bool(cfg.get("mamba_proj_bias", False)),
    )
    attention = gqa_params(cfg, bool(cfg.get("attention_bias", False)), qk_norm=False)
    mlp = 2 * hidden * int_(cfg, "intermediate_size")
    experts, moe_total, moe_active = None, 0, 0
    moe_layers = kinds.count("moe")
    if moe_layers:
        n = int_(cfg, "n_routed_experts")
        k = experts_per_token(cfg, n)
        expert = 2 * hidden * int_(cfg, "moe_intermediate_size")
        shared = 2 * hidden * int_(cfg, "moe_shared_expert_intermediate_size", 0)
        shared *= int_(cfg, "n_shared_experts", 1)
        router = hidden * n + n
        moe_total, moe_active = n * expert + shared + router, k * expert + shared + router
        experts = Experts(n, k, expert, moe_layers, shared_params_per_layer=shared)
    cost = {
        "mamba": (mixer, 0, 0),
        "attention": (attention, 0, 0),
        "mlp": (0, mlp, mlp),
        "moe": (0, moe_total, moe_active),
    }
    layers = [Layer(*cost[kind], hidden) for kind in kinds if kind is not None]
    ssm = get(cfg, "mamba_ssm_cache_dtype", "float32")
    if ssm not in SSM_CACHE_BYTES:
        raise ConfigError(
            "config.json: 'mamba_ssm_cache_dtype' must be one of "
            f"{', '.join(sorted(SSM_CACHE_BYTES))}"
        )
    recurrent = Recurrent("mamba", kinds.count("mamba"), conv, state, SSM_CACHE_BYTES[ssm])
    windows = (0,) * kinds.count("attention")
    return assemble(
        cfg, layers, gqa_attention(cfg, windows), experts, tied_default=False, recurrent=recurrent
    )
