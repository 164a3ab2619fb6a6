"""A config.json bounded before any work is spent on it: size, depth, dimensions.

A config.json is a few kilobytes and a handful of levels deep, and its
dimensions are those of real models. The limits here are far above any
published model and far below what would exhaust memory: the parser allocates
one entry per layer, so 10^9 layers would take gigabytes before failing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config.json that cannot be costed; the message names the key."""


MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 8
MAX_NODES = 20_000
DEFAULT_MAX = 2**31
LIMITS: dict[str, int] = {
    "num_hidden_layers": 1024,
    "hidden_size": 2**17,
    "intermediate_size": 2**20,
    "moe_intermediate_size": 2**20,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "head_dim": 4096,
    "vocab_size": 2**22,
    "max_position_embeddings": 2**25,
    "sliding_window": 2**25,
    "max_window_layers": 1024,
    "sliding_window_pattern": 1024,
    "num_local_experts": 4096,
    "num_experts": 4096,
    "n_routed_experts": 4096,
    "num_experts_per_tok": 4096,
    "n_shared_experts": 4096,
    "kv_lora_rank": 2**16,
    "q_lora_rank": 2**16,
    "qk_rope_head_dim": 4096,
    "qk_nope_head_dim": 4096,
    "v_head_dim": 4096,
    "first_k_dense_replace": 1024,
    "decoder_sparse_step": 1024,
    "moe_layer_freq": 1024,
}
# Keys that must be at least 1 (0 would divide by zero or describe no model).
POSITIVE = frozenset(
    {
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "vocab_size",
        "max_position_embeddings",
    }
)


def config_shape_problem(obj: Any) -> str | None:
    """Why ``obj`` is not the shape of a config.json (too deep, too big), or None.

    Walks iteratively with a budget, so a YAML document whose aliases repeat
    one node a billion times is refused after ``MAX_NODES`` visits.
    """
    todo: list[tuple[Any, int]] = [(obj, 0)]
    seen = 0
    while todo:
        node, depth = todo.pop()
        seen += 1
        if seen > MAX_NODES:
            return f"more than {MAX_NODES:,} values: not a config.json"
        if isinstance(node, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels: not a config.json"
            children = node.values() if isinstance(node, Mapping) else node
            todo.extend((child, depth + 1) for child in children)
        elif isinstance(node, str) and len(node) > 10_000:
            return "a string longer than 10,000 characters: not a config.json"
    return None


def read_config_json(path: Path) -> dict[str, Any]:
    """A config.json file as a mapping, bounded in size and depth; ConfigError otherwise.

    Messages do not name ``path``: the caller does.
    """
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read config.json: {exc.strerror or exc}") from exc
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"config.json: larger than {MAX_FILE_BYTES:,} bytes")
    try:
        cfg = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ConfigError("config.json: nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot read config.json: {exc}") from exc
    if not isinstance(cfg, dict):
        raise ConfigError("config.json: must be a JSON object")
    problem = config_shape_problem(cfg)
    if problem:
        raise ConfigError(f"config.json: {problem}")
    return cfg


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def show(value: Any) -> str:
    """A value for a one-line message, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
