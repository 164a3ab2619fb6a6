"""Nemotron-H (``nemotron_h``): layers by pattern, parameters and vLLM's Mamba pages.

The Nemotron 3 Nano 30B-A3B keys are those of its released config.json
(nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16); NVIDIA publishes 31.6B parameters in
all and 3.2-3.6B active per token, with and without the embeddings
(https://replicate.com/nvidia/nemotron-3-nano-30b-a3b/readme).
"""

from __future__ import annotations

import pytest
from backpressure.catalog.hf_config import ConfigError, parse_config
from backpressure.engine.kv_pool import vllm_pool
from backpressure.engine.units import GIB

NANO_30B = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "attention_bias": False,
    "conv_kernel": 4,
    "head_dim": 128,
    "hidden_size": 2688,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "intermediate_size": 1856,
    "mamba_head_dim": 64,
    "mamba_num_heads": 64,
    "mamba_proj_bias": False,
    "mamba_ssm_cache_dtype": "float32",
    "max_position_embeddings": 262144,
    "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712,
    "n_groups": 8,
    "n_routed_experts": 128,
    "n_shared_experts": 1,
    "num_attention_heads": 32,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 52,
    "num_key_value_heads": 2,
    "ssm_state_size": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_conv_bias": True,
    "vocab_size": 131072,
}


def test_nano_30b_layers_and_published_sizes():
    arch = parse_config(NANO_30B)
    assert arch.layout() == "6 full + 23 mamba"
    assert arch.experts is not None
    assert (arch.experts.num_experts, arch.experts.experts_per_token) == (128, 6)
    assert arch.experts.moe_layers == 23
    assert round(arch.total_params / 1e8) == 316
    assert round(arch.active_params / 1e8) == 36  # embeddings included
    assert round((arch.active_params - arch.lookup_only_params) / 1e8) == 32


def test_nano_30b_state_is_kept_in_float32_as_its_config_asks():
    # vLLM 0.19.1, fp8 KV, the NVFP4 Cascade-2 checkpoint of this architecture on one
    # H100: "Setting attention block size to 4176 tokens", "Padding mamba page size by
    # 0.19%", "Available KV cache memory: 68.97 GiB", "GPU KV cache size: 4,819,104
    # tokens", "Maximum concurrency for 262,144 tokens per request: 86.16x". A state
    # in the model's bf16 would need half the block.
    pool = vllm_pool(parse_config(NANO_30B), 1.0, 262144, 8192)
    assert pool.block == 4176
    state = 3 * (4096 + 2 * 8 * 128) * 2 + 64 * 64 * 128 * 4
    assert round(100 * (pool.page_bytes - state) / state, 2) == 0.19
    avail = int(68.97 * GIB)
    assert pool.reported_tokens(avail) == 4_819_104
    # the log prints the memory to 0.01 GiB, a block's worth (12.2 MiB) either way
    assert pool.max_concurrency(avail) == pytest.approx(86.16, abs=0.02)


def test_a_pattern_of_the_wrong_length_or_letters_is_refused():
    with pytest.raises(ConfigError, match="one character per layer"):
        parse_config({**NANO_30B, "hybrid_override_pattern": "M*E"})
    with pytest.raises(ConfigError, match="only M"):
        parse_config({**NANO_30B, "hybrid_override_pattern": "X" * 52})
    with pytest.raises(ConfigError, match="mamba_ssm_cache_dtype"):
        parse_config({**NANO_30B, "mamba_ssm_cache_dtype": "int4"})


def test_the_unsupported_type_message_names_nemotron_h():
    with pytest.raises(ConfigError) as info:
        parse_config({**NANO_30B, "model_type": "not_a_model"})
    assert "nemotron_h" in str(info.value)
