"""An LLM node's service in the tick loop: the serving model's step cost, per tick.

The model server of a config page (:mod:`backpressure.engine.serving`) runs a
discrete scheduler, request by request. The tick loop keeps fluid counts
instead, so an LLM node prices its work each tick with the same step cost
(:func:`backpressure.engine.serving.step.step_parts`) for the batch it holds,
``n`` sequences (its fluid ``inflight`` rounded up to whole sequences, at least
one, at most the slots), each with a prompt of ``P`` and an output of ``O``
tokens:

* a prompt rides in a step beside the other ``n - 1`` sequences' decode tokens,
  whole if the step's token budget leaves room for it, else in chunks of what
  the budget leaves (chunked prefill), one chunk per step; every other step
  decodes one token for each of the ``n`` sequences;
* while the ``n`` sequences each complete one request, ``n`` prompts (each in
  ``k`` chunks) and ``O - 1`` decode steps per request go by: a request holds
  its slot for ``S = max(O - 1 + k, n k)`` steps, ``n k`` of which carry a
  prompt chunk: :func:`slot_s`;
* its first token comes after the steps that carry its own prompt beside the
  sequences already decoding, plus the host's intake and the latency in and
  out of the server: :func:`first_token_s`.

A lone request costs its prompt's step and ``O - 1`` decode steps, as in the
discrete scheduler; under load the mix is an average, so the queueing the
scheduler shows between its steps (a burst of prompts arriving together) is
not modelled. Each decoding sequence holds its prompt and half its output in
the KV cache.

The functions are scalar and use only integer arithmetic, ``+ - * /``, ``min``,
``max`` and :func:`step_parts`, so the compiled loop, the numpy loop and the
JavaScript port give the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from backpressure.engine.serving.step import LATENCY_S, REQUEST_S, step_parts
from backpressure.engine.sim.jit import compiled

Array = npt.NDArray[np.float64]

# Fluid sequences below this are rounding residue, not a sequence in the batch.
SEQ_DUST = 1e-9


def _batch_py(inflight: float, slots: int) -> int:  # pragma: no cover - compiled
    """Whole sequences in flight: ``inflight`` rounded up, at most ``slots`` [-]."""
    if inflight <= SEQ_DUST:
        return 0
    return min(math.ceil(inflight - SEQ_DUST), slots)


def _prompt_step_py(
    cost: Any, experts: Any, prompt: int, output: int, budget: int, ubatch: int, decoding: int
) -> tuple[float, int]:  # pragma: no cover - compiled
    """One step carrying a prompt chunk beside ``decoding`` sequences: its time [s] and chunks."""
    chunk = min(prompt, max(budget - decoding, 1))
    chunks = (prompt + chunk - 1) // chunk
    passes = (decoding + chunk + ubatch - 1) // ubatch
    kv = decoding * (prompt + 0.5 * output)
    prefix = chunk * (chunks - 1) * 0.5  # a chunk reads the earlier chunks' KV, on average
    pairs = chunk * (prompt + 1) * 0.5
    step = _step_parts(cost, experts, decoding, kv, chunk, prefix, pairs, passes, decoding + 1)
    return step[0], chunks


def _slot_s_py(
    cost: Any,
    experts: Any,
    slots: int,
    prompt: int,
    output: int,
    budget: int,
    ubatch: int,
    inflight: float,
) -> float:  # pragma: no cover - compiled
    """Seconds one request holds a slot at this load [s] (see the module notes)."""
    n = max(_batch(inflight, slots), 1)
    with_prompt, chunks = _prompt_step(cost, experts, prompt, output, budget, ubatch, n - 1)
    passes = (n + ubatch - 1) // ubatch
    kv = n * (prompt + 0.5 * output)
    decode = _step_parts(cost, experts, n, kv, 0, 0.0, 0.0, passes, n)[0]
    prompts = n * chunks
    steps = max(output - 1 + chunks, prompts)
    return float(prompts * with_prompt + (steps - prompts) * decode)


def _first_token_s_py(
    cost: Any,
    experts: Any,
    slots: int,
    prompt: int,
    output: int,
    budget: int,
    ubatch: int,
    inflight: float,
) -> float:  # pragma: no cover - compiled
    """Seconds from a request's admission to its first token [s] (see the module notes)."""
    decoding = _batch(inflight, slots)
    step, chunks = _prompt_step(cost, experts, prompt, output, budget, ubatch, decoding)
    return float(chunks * step + cost[REQUEST_S] + cost[LATENCY_S])


def _times_lanes_py(
    costs: Any,
    experts: Any,
    slots: Any,
    prompt: Any,
    output: Any,
    budget: Any,
    ubatch: Any,
    inflight: Any,
    slot_out: Any,
    first_out: Any,
) -> None:  # pragma: no cover - compiled
    for j in range(inflight.shape[0]):
        c, e, b = costs[j], experts[j], inflight[j]
        slot_out[j] = _slot_s(c, e, slots[j], prompt[j], output[j], budget[j], ubatch[j], b)
        first_out[j] = _first_token_s(c, e, slots[j], prompt[j], output[j], budget[j], ubatch[j], b)


# Helpers first: a compiled function binds the compiled versions of the globals
# it calls as they are when it is first compiled.
_step_parts = compiled(step_parts, "always")
_batch = compiled(_batch_py, "always")
_prompt_step = compiled(_prompt_step_py, "always")
slot_s: Callable[..., float] = compiled(_slot_s_py, "always")
first_token_s: Callable[..., float] = compiled(_first_token_s_py, "always")
_slot_s = slot_s
_first_token_s = first_token_s
_times_lanes: Callable[..., None] = compiled(_times_lanes_py)


def times_lanes(
    costs: Array,
    experts: Array,
    ints: npt.NDArray[np.int64],
    inflight: Array,
) -> tuple[Array, Array]:
    """:func:`slot_s` and :func:`first_token_s` of every lane [s].

    Parameters
    ----------
    costs : numpy.ndarray
        ``(lanes, COST_FIELDS)``: each lane's packed step cost.
    experts : numpy.ndarray
        ``(lanes, k)``: each lane's distinct-experts table, zero-padded.
    ints : numpy.ndarray
        ``(5, lanes)``: slots, prompt tokens, output tokens, step token budget,
        tokens per pass.
    inflight : numpy.ndarray
        ``(lanes,)``: sequences in flight [-].
    """
    slot_out = np.empty(inflight.shape[0])
    first_out = np.empty(inflight.shape[0])
    _times_lanes(costs, experts, *ints, inflight, slot_out, first_out)
    return slot_out, first_out
