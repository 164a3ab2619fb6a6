"""Plain description of a transformer's architecture, as the engine needs it.

Layers come in kinds that cost memory differently (SPEC §2):

- ``full`` attention keeps a key and a value per token for the whole context;
- ``sliding`` attention (Gemma 2/3, gpt-oss) keeps at most its window;
- ``chunked`` local attention (Llama 4) attends within fixed chunks, so it keeps
  at most one chunk;
- ``linear`` attention (Qwen3-Next's Gated DeltaNet) and ``mamba`` layers
  (Granite 4.0-H) keep a fixed recurrent state per sequence, whatever its length.

:class:`Attention` describes the layers that cache keys and values (one entry of
``window_per_layer`` each); :class:`Recurrent` the fixed-state layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LocalKind = Literal["sliding", "chunked"]
RecurrentKind = Literal["linear", "mamba"]


@dataclass(frozen=True, slots=True)
class Attention:
    """Attention shape of one model: the layers that cache keys and values.

    ``window_per_layer`` holds, for each layer with a KV cache, its window in
    tokens, or 0 for a full (global) layer; layers without a KV cache (linear
    attention, Mamba) are not in it. ``local`` says how the windowed layers
    hold tokens: ``sliding`` (the last ``window`` tokens) or ``chunked`` (the
    tokens of the current ``window``-sized chunk). MLA models set
    ``mla_latent_dim`` (kv_lora_rank + qk_rope_head_dim): the cache keeps that
    many elements per layer per token instead of separate keys and values.
    ``sinks`` records learned attention-sink logits (gpt-oss): one scalar per
    head in the weights, nothing in the cache.
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    window_per_layer: tuple[int, ...]
    mla_latent_dim: int = 0
    local: LocalKind = "sliding"
    sinks: bool = False

    @property
    def full_layers(self) -> int:
        """Layers that keep the whole context."""
        return sum(1 for w in self.window_per_layer if not w)

    @property
    def windowed_layers(self) -> int:
        """Layers capped at a sliding window or a chunk."""
        return sum(1 for w in self.window_per_layer if w)


@dataclass(frozen=True, slots=True)
class Recurrent:
    """Layers that keep a fixed state per sequence instead of a per-token cache.

    ``conv_elements`` and ``state_elements`` are the elements of one layer's
    short-convolution window and of its recurrent (SSM or delta-rule) state for
    one sequence, before tensor parallelism (both are split across GPUs by heads
    and channels).
    """

    kind: RecurrentKind
    layers: int
    conv_elements: int
    state_elements: int
    # Bytes of one recurrent-state element where the checkpoint fixes them for vLLM
    # (NemotronH's ``mamba_ssm_cache_dtype``); 0: the model's dtype, as the conv window.
    state_bytes: int = 0

    @property
    def elements_per_layer(self) -> int:
        """State elements one sequence holds in one layer."""
        return self.conv_elements + self.state_elements

    def vllm_bytes_per_layer(self, dtype_bytes: int) -> int:
        """One sequence's state in one layer as vLLM stores it [bytes]."""
        return self.conv_elements * dtype_bytes + self.state_elements * (
            self.state_bytes or dtype_bytes
        )


@dataclass(frozen=True, slots=True)
class Experts:
    """Mixture-of-Experts routing: how many experts exist and how many run per token.

    ``shared_params_per_layer`` counts the always-on shared experts of one MoE
    layer (DeepSeek, Llama 4, Qwen3-Next, GLM); they are read by every token like
    the dense part.
    """

    num_experts: int
    experts_per_token: int
    expert_params: int
    moe_layers: int
    shared_params_per_layer: int = 0


@dataclass(frozen=True, slots=True)
class ModelArch:
    """A model reduced to what memory, KV and speed depend on.

    ``total_params`` counts every weight in the checkpoint the runtime loads
    (embeddings, attention, MLPs, all experts, norms, lm_head when untied);
    ``active_params`` counts what one token reads (all experts replaced by the
    routed ones). ``num_layers`` counts every decoder layer; the ones with a KV
    cache are ``attention.window_per_layer``, the others ``recurrent.layers``.
    """

    name: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    max_context: int
    dtype_bytes: int
    attention: Attention
    total_params: int
    active_params: int
    experts: Experts | None = None
    intermediate_size: int = 0
    embedding_params: int = 0
    # Rows of an untied input embedding are looked up, not streamed: a decode step
    # reads one row per token, so these parameters are not part of the step's read.
    lookup_only_params: int = 0
    recurrent: Recurrent | None = None

    @property
    def is_moe(self) -> bool:
        """Whether the model routes tokens to a subset of experts."""
        return self.experts is not None

    @property
    def is_hybrid(self) -> bool:
        """Whether layers of more than one memory kind share the model."""
        a = self.attention
        kinds = (a.full_layers > 0) + (a.windowed_layers > 0) + (self.recurrent is not None)
        return kinds > 1

    def layout(self) -> str:
        """The layer kinds in words, e.g. ``12 full + 12 sliding(128)``."""
        a = self.attention
        parts = [f"{a.full_layers} full"] if a.full_layers else []
        for w in sorted({w for w in a.window_per_layer if w}):
            parts.append(f"{a.window_per_layer.count(w)} {a.local}({w})")
        if self.recurrent is not None:
            parts.append(f"{self.recurrent.layers} {self.recurrent.kind}")
        return " + ".join(parts)
