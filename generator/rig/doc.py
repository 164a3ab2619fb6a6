"""A rig as the builder's URL fragment carries it: parse it, write it back.

The fragment is ``&``-separated ``key=value`` pairs, each percent-encoded::

    v=1&seed=1&t=600&load=constant&rps=1000&arrivals=poisson
    &node=app:app-tier:load&app.workers=16
    &node=postgres:postgres:app&postgres.discipline=buffer
    &slo.p99_ms=500&sweep=100:100:40&claim=fail:p99:postgres&breaking=1500

``node=NAME:PART:AFTER`` declares a node (in order); ``NAME.FIELD=VALUE``
overrides a field of its part; ``slo.FIELD`` sets a failure rule; ``sweep`` is
``start:step:points``; ``claim`` (``pass`` or ``fail:RULE:NODE``) and
``breaking`` are what the page computed, for ``backpressure verify`` to check.
Values are numbers, ``true``/``false``, ``none``, or words. Anything left out
takes its default (the part's catalog value, the scenario schema's default).
``web/rig/rig.js`` reads and writes the same grammar.

This module checks the grammar only; :mod:`backpressure.generator.rig.build`
checks the values against the catalog.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

VERSION = "1"
SHAPES = ("constant", "ramp", "step", "bursty")
ARRIVALS = ("poisson", "deterministic")
# Load fields each shape reads (the rest keep their defaults).
SHAPE_FIELDS = {
    "constant": (),
    "ramp": ("start_fraction", "ramp_s"),
    "step": ("base_fraction", "at_s", "until_s"),
    "bursty": ("burst_bias",),
}
LOAD_FIELDS = ("start_fraction", "ramp_s", "base_fraction", "at_s", "until_s", "burst_bias")
SLO_FIELDS = ("p99_ms", "ttft_ms", "availability", "soak_utilization", "soak_s", "window_s")
RULE_NAMES = ("ttft", "p99", "error_budget", "soak")
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
RESERVED = ("load", "slo")  # the source, and the rules' prefix
FIELD = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
INT = re.compile(r"^-?[0-9]+$")
FLOAT = re.compile(r"^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$")
SAFE = "-_.!~*'()"  # what encodeURIComponent leaves as it is
MAX_FRAGMENT = 8192
BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
MAX_SEED = 2**32 - 1


class RigError(ValueError):
    """A fragment or rig that cannot be run; the message is one line naming the field."""


Scalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class RigNode:
    """One node: its name, its part, its upstream and the part fields it overrides."""

    name: str
    part: str
    after: str
    fields: tuple[tuple[str, Scalar], ...] = ()

    def overrides(self) -> dict[str, Scalar]:
        """The overridden fields as a mapping."""
        return dict(self.fields)


@dataclass(frozen=True, slots=True)
class Claim:
    """What a page said about its run: the verdict, and the breaking rate if it swept."""

    passed: bool
    rule: str | None = None
    node: str | None = None

    def text(self) -> str:
        """``pass`` or ``fail:RULE:NODE``."""
        return "pass" if self.passed else f"fail:{self.rule}:{self.node}"


@dataclass(frozen=True, slots=True)
class Rig:
    """A whole rig: the run's seed and length, the load, the nodes, the rules, the sweep."""

    seed: int = 1
    duration_s: float = 600.0
    shape: str = "constant"
    rps: float | None = None
    arrivals: str = "poisson"
    load: tuple[tuple[str, float | None], ...] = ()
    nodes: tuple[RigNode, ...] = ()
    slo: tuple[tuple[str, float | None], ...] = ()
    sweep: tuple[float, float, int] | None = None
    claim: Claim | None = None
    breaking: tuple[float | None] | None = field(default=None)


def scalar(text: str) -> Scalar:
    """A fragment value: ``none``, ``true``/``false``, an int, a float, or the word itself."""
    if text == "none":
        return None
    if text in ("true", "false"):
        return text == "true"
    if INT.match(text):
        return int(text)
    if FLOAT.match(text):
        return float(text)
    return text


def number(text: str, key: str, allow_none: bool = False) -> float | None:
    """A numeric value, or a :class:`RigError` naming ``key``."""
    value = scalar(text)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RigError(f"{key}: expected a number, got '{text}'")
    out = float(value)
    if not math.isfinite(out):
        raise RigError(f"{key}: expected a finite number, got '{text}'")
    return out


def integer(text: str, key: str) -> int:
    """An integer value, or a :class:`RigError` naming ``key``."""
    if not INT.match(text):
        raise RigError(f"{key}: expected a whole number, got '{text}'")
    return int(text)


def pairs(text: str) -> list[tuple[str, str]]:
    """The fragment's decoded ``(key, value)`` pairs, in order."""
    body = text.split("#", 1)[1] if "#" in text else text
    if len(body) > MAX_FRAGMENT:
        raise RigError(f"fragment: longer than {MAX_FRAGMENT} characters")
    out = []
    for item in body.split("&"):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise RigError(f"fragment: '{decode(key)}' has no '=value'")
        out.append((decode(key), decode(value)))
    return out


def decode(text: str) -> str:
    """Percent-decoding as JavaScript's ``decodeURIComponent``: strict, or a :class:`RigError`."""
    if BAD_ESCAPE.search(text):
        raise RigError("fragment: bad percent-encoding")
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise RigError("fragment: bad percent-encoding") from None


def parse(text: str) -> Rig:
    """The rig a URL or fragment describes (grammar only; values are checked later)."""
    items = pairs(text)
    if not items or items[0] != ("v", VERSION):
        raise RigError(f"fragment: must start with v={VERSION} (a rig builder link)")
    top: dict[str, str] = {}
    nodes: list[list[Any]] = []
    by_name: dict[str, list[Any]] = {}
    for key, value in items[1:]:
        if key == "node":
            node = _declare(value, by_name)
            nodes.append(node)
            by_name[node[0]] = node
            continue
        head, dot, rest = key.partition(".")
        if dot and head != "slo":
            if head not in by_name:
                raise RigError(f"{key}: no node '{head}' declared before it")
            if not FIELD.match(rest):
                raise RigError(f"{key}: not a field name")
            fields = by_name[head][3]
            if rest in fields:
                raise RigError(f"{key}: given twice")
            fields[rest] = scalar(value)
            continue
        if key in top:
            raise RigError(f"{key}: given twice")
        top[key] = value
    return _rig(top, nodes)


def _declare(value: str, by_name: dict[str, list[Any]]) -> list[Any]:
    bits = value.split(":")
    if len(bits) != 3:
        raise RigError(f"node: expected NAME:PART:AFTER, got '{value}'")
    name, part, after = bits
    if not NAME.match(name) or name in RESERVED:
        raise RigError(f"node: '{name}' is not a node name (a-z, 0-9, - and _; not load or slo)")
    if name in by_name:
        raise RigError(f"node: '{name}' declared twice")
    return [name, part, after, {}]


def _rig(top: dict[str, str], nodes: list[list[Any]]) -> Rig:
    known = {"seed", "t", "load", "rps", "arrivals", "sweep", "claim", "breaking"}
    known |= set(LOAD_FIELDS) | {f"slo.{f}" for f in SLO_FIELDS}
    for key in top:
        if key not in known:
            raise RigError(f"{key}: unknown key")
    shape = top.get("load", "constant")
    if shape not in SHAPES:
        raise RigError(f"load: expected one of {', '.join(SHAPES)}, got '{shape}'")
    arrivals = top.get("arrivals", "poisson")
    if arrivals not in ARRIVALS:
        raise RigError(f"arrivals: expected one of {', '.join(ARRIVALS)}, got '{arrivals}'")
    load = tuple((f, number(top[f], f, allow_none=f == "until_s")) for f in LOAD_FIELDS if f in top)
    slo = tuple(
        (f, number(top[f"slo.{f}"], f"slo.{f}", allow_none=f == "p99_ms"))
        for f in SLO_FIELDS
        if f"slo.{f}" in top
    )
    return Rig(
        seed=_seed(top["seed"]) if "seed" in top else 1,
        duration_s=_required(number(top["t"], "t")) if "t" in top else 600.0,
        shape=shape,
        rps=_required(number(top["rps"], "rps")) if "rps" in top else None,
        arrivals=arrivals,
        load=load,
        nodes=tuple(RigNode(n[0], n[1], n[2], tuple(n[3].items())) for n in nodes),
        slo=slo,
        sweep=_sweep(top["sweep"]) if "sweep" in top else None,
        claim=_claim(top["claim"]) if "claim" in top else None,
        breaking=(number(top["breaking"], "breaking", allow_none=True),)
        if "breaking" in top
        else None,
    )


def _seed(text: str) -> int:
    seed = integer(text, "seed")
    if not 0 <= seed <= MAX_SEED:
        raise RigError(f"seed: a whole number from 0 to {MAX_SEED}")
    return seed


def _required(value: float | None) -> float:
    assert value is not None  # number() without allow_none never returns None
    return value


def _sweep(text: str) -> tuple[float, float, int]:
    bits = text.split(":")
    if len(bits) != 3:
        raise RigError(f"sweep: expected START:STEP:POINTS, got '{text}'")
    return (
        _required(number(bits[0], "sweep start")),
        _required(number(bits[1], "sweep step")),
        integer(bits[2], "sweep points"),
    )


def _claim(text: str) -> Claim:
    if text == "pass":
        return Claim(True)
    bits = text.split(":")
    if len(bits) != 3 or bits[0] != "fail" or bits[1] not in RULE_NAMES:
        raise RigError(f"claim: expected pass or fail:RULE:NODE, got '{text}'")
    return Claim(False, bits[1], bits[2])


def value_text(value: Scalar) -> str:
    """A value as the fragment writes it (the shortest text that reads back the same)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    return value


def fragment(rig: Rig) -> str:
    """The fragment of a rig (without the ``#``), in the canonical key order."""
    out: list[tuple[str, Scalar]] = [("v", 1), ("seed", rig.seed), ("t", rig.duration_s)]
    out += [("load", rig.shape)]
    if rig.rps is not None:
        out.append(("rps", rig.rps))
    out.append(("arrivals", rig.arrivals))
    out += list(rig.load)
    for n in rig.nodes:
        out.append(("node", f"{n.name}:{n.part}:{n.after}"))
        out += [(f"{n.name}.{k}", v) for k, v in n.fields]
    out += [(f"slo.{k}", v) for k, v in rig.slo]
    if rig.sweep is not None:
        start, step, points = rig.sweep
        out.append(("sweep", ":".join(value_text(v) for v in (start, step, points))))
    if rig.claim is not None:
        out.append(("claim", rig.claim.text()))
    if rig.breaking is not None:
        out.append(("breaking", rig.breaking[0]))
    return "&".join(
        f"{quote(k, safe=SAFE)}={quote(value_text(v), safe=SAFE + ':')}" for k, v in out
    )
