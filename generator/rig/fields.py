"""The fields a rig may set, with their types and bounds read from the scenario schema.

One table, two checkers: :func:`check` here and ``checkValue`` in
``web/rig/rig.js`` apply the same rules to the same table (shipped to the
browser in ``rig/data/index.json``) and word their errors the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from backpressure.catalog.scenario import LlmPart, QueueFields
from backpressure.generator.rig.doc import RigError, Scalar, value_text
from pydantic import BaseModel

# Part fields a rig may not set: catalog bookkeeping, and an LLM's capacity
# inputs, which come from its config instead.
FIXED = {"id", "name", "sources", "notes", "kind"}
LLM_FROM_CONFIG = {
    "gpu",
    "model",
    "params_b",
    "quant",
    "context",
    "runtime",
    "kv_dtype",
    "slots",
    "prefill_tokens_per_s",
    "step_fixed_s",
    "step_per_kv_token_s",
    "step_compute_per_seq_s",
}
CONFIG = "config"  # the LLM node's field naming a config page's config id
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum")


def node_fields(kind: type[QueueFields]) -> list[str]:
    """The fields a rig node of this part kind may set, in the schema's order."""
    names = [f for f in kind.model_fields if f not in FIXED]
    if kind is LlmPart:
        names = [f for f in names if f not in LLM_FROM_CONFIG] + [CONFIG]
    return names


def field_spec(schema: dict[str, Any]) -> dict[str, Any]:
    """A field's type, whether it may be none, and its bounds, from its JSON schema."""
    options = schema.get("anyOf", [schema])
    inner = next((o for o in options if o.get("type") != "null"), options[0])
    spec: dict[str, Any] = {"type": inner.get("type", "string")}
    spec["nullable"] = any(o.get("type") == "null" for o in options)
    spec.update({k: inner[k] for k in BOUNDS if k in inner})
    return spec


def fields_of(model: type[BaseModel], names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The specs of ``names`` in ``model``'s schema (``config`` is a config id)."""
    props = model.model_json_schema()["properties"]
    return {n: field_spec(props[n]) if n in props else {"type": CONFIG} for n in names}


def quoted(value: Scalar) -> str:
    """A word, ``true``/``false`` or ``none`` in an error message, as both languages write it."""
    return f"'{value_text(value)}'"


def number_text(x: float) -> str:
    """A bound in an error message: ``0``, ``0.5``, ``3600`` (as JavaScript prints it)."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def check(spec: dict[str, Any], value: Scalar, where: str) -> None:
    """Raise a :class:`RigError` unless ``value`` fits the field ``spec``."""
    kind = spec["type"]
    if value is None:
        if not spec.get("nullable"):
            raise RigError(f"{where}: must be given (none is not allowed)")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise RigError(f"{where}: expected true or false, got {quoted(value)}")
    elif kind in ("string", CONFIG):
        if not isinstance(value, str) or ("enum" in spec and value not in spec["enum"]):
            choices = f"one of {', '.join(spec['enum'])}" if "enum" in spec else "a word"
            raise RigError(f"{where}: expected {choices}, got {quoted(value)}")
    else:
        _check_number(spec, value, where)


def _check_number(spec: dict[str, Any], value: Scalar, where: str) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise RigError(f"{where}: expected a number, got {quoted(value)}")
    x = float(value)
    if not math.isfinite(x):
        raise RigError(f"{where}: expected a finite number")
    if spec["type"] == "integer" and not x.is_integer():
        raise RigError(f"{where}: expected a whole number")
    for key, words in BOUND_WORDS:
        if key in spec and not _within(key, x, spec[key]):
            raise RigError(f"{where}: must be {words} {number_text(spec[key])}")


BOUND_WORDS = (
    ("minimum", "at least"),
    ("exclusiveMinimum", "greater than"),
    ("maximum", "at most"),
    ("exclusiveMaximum", "less than"),
)


def _within(key: str, x: float, bound: float) -> bool:
    if key == "minimum":
        return x >= bound
    if key == "exclusiveMinimum":
        return x > bound
    if key == "maximum":
        return x <= bound
    return x < bound
