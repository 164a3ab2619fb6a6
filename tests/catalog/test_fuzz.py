"""Fuzz the schema and the config parser: bad input is reported, never raised."""

from __future__ import annotations

import math

from backpressure.catalog.errors import Problem
from backpressure.catalog.hf_config import ConfigError, parse_config
from backpressure.catalog.loader import KINDS, load_catalog, validate_entity
from hypothesis import given, settings
from hypothesis import strategies as st

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def entity_data(kind_name: str) -> st.SearchStrategy[dict]:
    fields = sorted(KINDS[kind_name].model_fields)
    return st.dictionaries(st.sampled_from([*fields, "bogus"]), VALUES, max_size=len(fields) + 1)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(KINDS)).flatmap(lambda k: st.tuples(st.just(k), entity_data(k))))
def test_any_entity_data_validates_or_is_reported(kind_and_data):
    kind, data = kind_and_data
    problems: list[Problem] = []
    obj = validate_entity(KINDS[kind], data, f"catalog/{kind}/x.yaml", "x", problems)
    assert (obj is None) == bool(problems)
    for p in problems:
        assert str(p).startswith(f"catalog/{kind}/x.yaml")


CONFIG_KEYS = [
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "sliding_window",
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "n_routed_experts",
    "first_k_dense_replace",
    "layer_types",
    "text_config",
    "sliding_window_pattern",
    "decoder_sparse_step",
    "moe_layer_freq",
    "use_sliding_window",
    "max_window_layers",
    "tie_word_embeddings",
    "n_shared_experts",
    "q_lora_rank",
    "mlp_only_layers",
    "torch_dtype",
]
CONFIG_VALUES = st.one_of(
    st.sampled_from(
        [
            "llama",
            "mistral",
            "mixtral",
            "qwen2",
            "qwen3",
            "qwen3_moe",
            "minimax_m2",
            "gemma2",
            "gemma3",
            "phi3",
            "deepseek_v2",
            "deepseek_v3",
            "gpt9",
        ]
    ),
    st.integers(-5, 70000),
    st.none(),
    st.text(max_size=5),
    st.floats(allow_nan=True),
)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), CONFIG_VALUES, max_size=len(CONFIG_KEYS)))
def test_any_config_parses_or_raises_config_error(cfg):
    try:
        arch = parse_config(cfg)
    except ConfigError:
        return
    assert arch.total_params >= arch.active_params >= 0
    assert all(math.isfinite(x) for x in (arch.total_params, arch.active_params))


BASE_CONFIGS: dict[str, dict] = {}


def setup_module() -> None:
    cat = load_catalog()
    BASE_CONFIGS.update({m: dict(cat.models[m].config) for m in BASES})


BASES = [
    "llama-3.1-8b",
    "gemma-3-27b",
    "gemma-2-9b",
    "qwen3-30b-a3b",
    "deepseek-v3",
    "mixtral-8x7b",
    "qwen2.5-7b",
    "mistral-7b-v0.1",
]


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(BASES),
    st.dictionaries(st.sampled_from(CONFIG_KEYS), CONFIG_VALUES, min_size=1, max_size=3),
)
def test_mutated_real_configs_parse_or_raise_config_error(base, changes):
    cfg = {**BASE_CONFIGS[base], **changes}
    try:
        arch = parse_config(cfg)
    except ConfigError:
        return
    assert arch.total_params >= arch.active_params >= 0
