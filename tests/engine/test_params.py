"""Total and active parameters computed from config.json against published figures."""

from __future__ import annotations

import pytest
from backpressure.catalog.hf_config import ConfigError, parse_config
from backpressure.engine.kv import kv_bytes_per_token

# Publishers round: "8B", "30.5B". 3 % covers rounding to the figures they print
# (Kimi K2 "1T" is 1.026T computed, Mistral NeMo "12B" 12.25B, the largest gaps).
TOTAL_REL = 0.03
# Active counts are published with the input embedding (Mixtral), without it
# (DeepSeek, gpt-oss: a lookup, not a read) or without embedding and output head
# (Qwen3-Next's "3B" of 3.25B); the model's notes say which.
ACTIVE_REL = 0.12


def test_every_published_total_matches(cat):
    checked = 0
    for mid, model in cat.models.items():
        if model.published_params is None:
            continue
        assert cat.archs[mid].total_params == pytest.approx(
            model.published_params, rel=TOTAL_REL
        ), mid
        checked += 1
    assert checked >= 20


def test_every_published_active_matches(cat):
    checked = 0
    for mid, model in cat.models.items():
        if model.published_active_params is None:
            continue
        arch = cat.archs[mid]
        published = model.published_active_params
        counts = (
            arch.active_params,
            arch.active_params - arch.lookup_only_params,
            arch.active_params - arch.embedding_params,
        )
        best = min(abs(c / published - 1) for c in counts)
        assert best <= ACTIVE_REL, (mid, counts, published)
        checked += 1
    assert checked >= 14


def test_mixtral_total_and_active(cat):
    arch = cat.archs["mixtral-8x7b"]
    assert round(arch.total_params / 1e9, 1) == 46.7
    assert round(arch.active_params / 1e9, 1) == 12.9


def test_new_architectures(cat):
    # gpt-oss-20b: 12 sliding (128) + 12 full layers, sinks; 3.6B active without the lookup
    oss = cat.archs["gpt-oss-20b"]
    assert oss.attention.window_per_layer[:2] == (128, 0)
    assert oss.attention.sinks
    assert round((oss.active_params - oss.lookup_only_params) / 1e9, 1) == 3.6
    # Llama 4 Scout: 36 chunked (8192) + 12 NoPE global layers
    scout = cat.archs["llama-4-scout"].attention
    assert scout.local == "chunked"
    assert scout.window_per_layer[:4] == (8192,) * 3 + (0,)
    # Maverick: MoE on every second layer
    assert cat.archs["llama-4-maverick"].experts.moe_layers == 24
    # Qwen3-Next: 12 attention layers with a KV cache, 36 Gated DeltaNet states
    nxt = cat.archs["qwen3-next-80b-a3b"]
    assert len(nxt.attention.window_per_layer) == 12
    assert nxt.recurrent.layers == 36
    assert nxt.recurrent.state_elements == 32 * 128 * 128
    assert nxt.recurrent.conv_elements == 3 * (2 * 16 * 128 + 32 * 128)
    # Granite 4.0-H Small: 4 attention layers (8 KV heads x 128), 36 Mamba-2 states of
    # 128 heads x 64 x d_state 128 and a conv window of 3 x (8192 + 2 x 1 x 128)
    granite = cat.archs["granite-4.0-h-small"]
    assert granite.layout() == "4 full + 36 mamba"
    assert kv_bytes_per_token(granite.attention, 2) == 2 * 4 * 8 * 128 * 2
    assert granite.recurrent.state_elements == 128 * 64 * 128
    assert granite.recurrent.conv_elements == 3 * (8192 + 2 * 128)
    # IBM publishes 32B total / 9B activated
    assert round(granite.total_params / 1e9) == 32
    assert round(granite.active_params / 1e9) == 9
    # Kimi K2 is DeepSeek-V3's architecture: MLA latent 512 + 64
    assert cat.archs["kimi-k2"].attention.mla_latent_dim == 576


def test_qwen3_moe_and_deepseek(cat):
    assert round(cat.archs["qwen3-30b-a3b"].total_params / 1e9, 1) == 30.5
    assert round(cat.archs["qwen3-30b-a3b"].active_params / 1e9, 1) == 3.4
    assert round(cat.archs["deepseek-v3"].total_params / 1e9) == 671


def test_mistral3_is_its_text_model(cat):
    # Mistral Small 3.1/3.2 nest a Mistral under text_config: the same 40 layers as
    # Small 3 (2501) with a 128k context; the Pixtral tower is not counted.
    small3, small32 = cat.archs["mistral-small-24b"], cat.archs["mistral-small-3.2-24b"]
    assert small32.total_params == small3.total_params
    assert small32.attention.num_kv_heads == 8
    assert (small3.max_context, small32.max_context) == (32768, 131072)
    with pytest.raises(ConfigError, match="text_config"):
        parse_config({"model_type": "mistral3", "architectures": ["X"]})


def test_glm_4_6_is_glm_4_5_with_a_longer_context(cat):
    # One architecture (Glm4MoeForCausalLM, 355B-A32B); GLM-4.6 raises 128K to 200K.
    glm45, glm46 = cat.archs["glm-4.5"], cat.archs["glm-4.6"]
    assert (glm46.total_params, glm46.active_params) == (glm45.total_params, glm45.active_params)
    assert glm46.attention == glm45.attention
    assert (glm45.max_context, glm46.max_context) == (131072, 202752)


def test_minimax_m2_is_every_layer_moe_with_full_attention():
    # the serving checks' MiniMax-M2.5 (benchmarks/data/calibration_archs.yaml):
    # published as 230B total, 10B active (transformers' model_doc/minimax_m2.md)
    from backpressure.generator.accuracy.archs import extra_archs

    arch = extra_archs()["MiniMaxAI/MiniMax-M2.5"]
    assert arch.total_params == pytest.approx(230e9, rel=TOTAL_REL)
    assert arch.active_params - arch.embedding_params == pytest.approx(10e9, rel=ACTIVE_REL)
    experts = arch.experts
    assert experts is not None
    assert (experts.num_experts, experts.experts_per_token, experts.moe_layers) == (256, 8, 62)
    assert experts.expert_params == 3 * 3072 * 1536  # gate, up and down of one SwiGLU expert
    assert set(arch.attention.window_per_layer) == {0}
    # 62 layers x 8 KV heads x 128 x (K and V) x 2 bytes
    assert kv_bytes_per_token(arch.attention, 2.0) == 62 * 8 * 128 * 2 * 2
