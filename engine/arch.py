"""Plain description of a transformer's architecture, as the engine needs it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Attention:
    """Attention shape of one model.

    ``window_per_layer`` holds each layer's sliding-window length in tokens, or 0
    for a global layer. MLA models set ``mla_latent_dim`` (kv_lora_rank +
    qk_rope_head_dim): the cache keeps that many elements per layer per token
    instead of separate keys and values.
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    window_per_layer: tuple[int, ...]
    mla_latent_dim: int = 0


@dataclass(frozen=True, slots=True)
class Experts:
    """Mixture-of-Experts routing: how many experts exist and how many run per token."""

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
    routed ones).
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

    @property
    def is_moe(self) -> bool:
        """Whether the model routes tokens to a subset of experts."""
        return self.experts is not None
