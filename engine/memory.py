"""Weights, usable memory and the KV budget."""

from __future__ import annotations

import math

from backpressure.engine.units import BITS_PER_BYTE


def weights_bytes(
    total_params: int,
    bits_per_weight: float,
    embedding_params: int = 0,
    embedding_bits: float | None = None,
) -> int:
    """Memory the weights occupy [bytes].

    Parameters
    ----------
    total_params : int
        Every parameter the runtime loads; for MoE all experts [parameters].
    bits_per_weight : float
        Effective bits per weight of the format, scales and minimums included
        (4.89 for GGUF Q4_K_M, not 4.0).
    embedding_params : int
        Parameters of the embedding and output head.
    embedding_bits : float or None
        Bits those are stored at when the format keeps them apart (AWQ, GPTQ and
        FP8 checkpoints keep them in 16-bit); None means the same as the rest.

    Examples
    --------
    >>> weights_bytes(7_000_000_000, 4.89)
    4278750000
    """
    if embedding_bits is None:
        return math.ceil(total_params * bits_per_weight / BITS_PER_BYTE)
    body = (total_params - embedding_params) * bits_per_weight
    return math.ceil((body + embedding_params * embedding_bits) / BITS_PER_BYTE)


def usable_memory_bytes(memory_bytes: int, usable_fraction: float | None) -> int:
    """Memory a model may use: all of discrete VRAM, a share of unified or system RAM.

    Parameters
    ----------
    memory_bytes : int
        Installed memory [bytes].
    usable_fraction : float or None
        Share the GPU may wire (Apple's recommendedMaxWorkingSetSize) or that a
        CPU host leaves after the OS; None for discrete memory.
    """
    if usable_fraction is None:
        return memory_bytes
    return math.floor(memory_bytes * usable_fraction)


def slots(kv_budget_bytes: int, kv_per_request_bytes: int) -> int:
    """Concurrent requests the cache holds: ``floor(budget / per request)``."""
    if kv_budget_bytes <= 0 or kv_per_request_bytes <= 0:
        return 0
    return kv_budget_bytes // kv_per_request_bytes
