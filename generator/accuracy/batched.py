"""llama.cpp ``llama-batched-bench`` tables against the step model.

Each row of ``benchmarks/data/batched_bench.csv`` (copied as printed, with its
source) runs ``B`` sequences: first their prompts of ``PP`` tokens (``T_PP``),
then ``TG`` decode steps of all ``B`` at once (``T_TG``). That is the step
model's own experiment with no scheduler and no HTTP front end around it, so
the case prices it directly with :func:`backpressure.engine.serving.step.step_time`:
the prompts in ``n_batch`` chunks of ``n_ubatch`` passes (laid out as the tool
does, position by position across the sequences), then every decode step with
the KV the sequences hold by then.

Compared like the serving runs: TTFT is the prompt phase ``T_PP``, TPOT one
decode step ``T_TG / TG``, output tokens/s ``S_TG``. Cases are split for
calibration by curve (source, device, model, quant, prompt length), fitted or
held out together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine.inputs import Constants
from backpressure.engine.serving.model import StepCost
from backpressure.engine.serving.spec import step_cost
from backpressure.engine.serving.step import expert_reads, pack, step_time
from backpressure.generator import resolve
from backpressure.generator.accuracy.rows import DATA, read_cases

_BATCH = re.compile(r"n_batch[ =](\d+)")
_UBATCH = re.compile(r"n_ubatch[ =](\d+)")
RUNTIME = "llama.cpp"


@dataclass(frozen=True, slots=True)
class BatchedCase:
    """One measured batched-bench row and how to price it."""

    row: int
    source: str
    curve: str
    holdout: bool
    gpu: str
    model: str
    quant: str
    prompt: int
    output: int
    batch: int
    shared: bool
    n_batch: int
    n_ubatch: int
    measured: Mapping[str, float]

    # What the report and the accuracy page print for a run (as for a serving case).
    gpus = 1
    framework = "llama.cpp"
    version = "llama-batched-bench"
    rate = None
    v1 = False

    @property
    def users(self) -> int:
        """Sequences decoding at once [-]."""
        return self.batch


def _num(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def holdout_curves(curves: list[tuple[str, str]]) -> frozenset[str]:
    """The held-out half of ``(group, curve)`` pairs, the same every run.

    With a dozen curves a coin flip per curve can leave a model wholly on one
    side, so the split alternates: groups (device and model) in name order,
    the curves of each in hash order, every second curve held out. Each model
    with two curves or more lands on both sides, and no measured number
    takes part in choosing.
    """
    ordered = sorted(set(curves), key=lambda gc: (gc[0], _hash(gc[1])))
    return frozenset(c for i, (_, c) in enumerate(ordered) if i % 2 == 1)


def load_batched(cat: Catalog, data: Path = DATA) -> tuple[list[BatchedCase], Counter[str]]:
    """Cases for every comparable row, and why the others were left out."""
    cases, skipped = read_cases(
        data / "batched_bench.csv",
        data / "batched_map.yaml",
        lambda mapping, i, r: _case(cat, mapping, i, r),
    )
    held = holdout_curves([(f"{c.gpu}|{c.model}", c.curve) for c in cases])
    return [dataclasses.replace(c, holdout=c.curve in held) for c in cases], skipped


def _case(
    cat: Catalog, mapping: Mapping[str, Any], i: int, r: Mapping[str, str]
) -> tuple[str, BatchedCase | None]:
    if r["hardware"] in mapping.get("excluded", {}):
        return mapping["excluded"][r["hardware"]], None
    gpu = mapping["hardware"].get(r["hardware"])
    model = mapping["models"].get(r["model"])
    quant = mapping["quants"].get(r["quant"])
    pp, tg, b, n_kv = (_num(r[k]) for k in ("pp", "tg", "b", "n_kv"))
    t_pp, t_tg, s_tg = (_num(r[k]) for k in ("t_pp_s", "t_tg_s", "s_tg_tps"))
    checks = (
        (gpu is None or gpu not in cat.gpus, "hardware not in the catalog"),
        (model is None or model not in cat.models, "model not in the catalog"),
        (quant is None or quant not in cat.quants, "quant not mapped"),
        (pp is None or tg is None or b is None or n_kv is None, "PP, TG, B or N_KV not printed"),
        (t_tg is None or s_tg is None, "decode time not printed"),
    )
    for bad, why in checks:
        if bad:
            return why, None
    if not (gpu and model and quant and pp and tg and b and n_kv and t_tg and s_tg):
        return "incomplete row", None  # the checks above rule it out; this narrows the types
    batch = _BATCH.search(r["flags"])
    ubatch = _UBATCH.search(r["flags"])
    n_batch = int(batch.group(1)) if batch else 2048  # llama.cpp's default -b
    n_ubatch = int(ubatch.group(1)) if ubatch else 512  # and -ub
    shared = int(n_kv) == int(pp) + int(b) * int(tg) and int(b) > 1
    measured = {"tpot_ms": t_tg / tg * 1e3, "output_tps": s_tg}
    if t_pp is not None:
        measured["ttft_ms"] = t_pp * 1e3
    curve = "|".join((r["source"], gpu, model, quant, str(int(pp))))
    return "", BatchedCase(
        i,
        r["source"],
        curve,
        False,  # set once every curve is known (holdout_curves)
        gpu,
        model,
        quant,
        int(pp),
        int(tg),
        int(b),
        shared,
        n_batch,
        min(n_ubatch, n_batch),
        measured,
    )


def cost_for(
    cat: Catalog, case: BatchedCase, constants: Constants | None = None
) -> tuple[StepCost, bool] | None:
    """The step cost of the case's device, model and quant under llama.cpp.

    The second value says whether the device has a compute figure for these
    weights. Without one (the catalog leaves unpublished figures unset) the
    step is priced by its memory and overheads alone: decode, which memory
    binds, is still compared, the prompt phase is not.
    """
    try:
        cfg = resolve.configure(
            cat, case.gpu, case.quant, case.prompt + case.output, case.model, runtime=RUNTIME
        )
    except (resolve.ComboError, KeyError):
        return None
    c = constants or cfg.constants
    cap = cfg.capacity()
    cost = step_cost(cfg.device, cfg.runtime, cfg.fmt, c, cfg.arch, cap)
    if cost is not None:
        return cost, True
    # 1e30 FLOP/s: the compute term vanishes (the field holds whole FLOP/s)
    unbounded = dataclasses.replace(cfg.device, bf16_flops_per_s=10**30)
    cost = step_cost(unbounded, cfg.runtime, cfg.fmt, c, cfg.arch, cap)
    return (cost, False) if cost is not None else None


def predict(case: BatchedCase, cost: StepCost, compute: bool = True) -> dict[str, float]:
    """Predicted T_PP [ms], one decode step [ms] and S_TG [tokens/s] of the case.

    Without a compute figure (``compute`` False) the prompt phase is not predicted.
    """
    packed = pack(cost)
    experts = expert_reads(cost, max(case.n_ubatch, case.batch))
    # Prompts: the tool lays tokens out position by position across the
    # sequences (one sequence when the prompt is shared) and decodes n_batch at a time.
    seqs = 1 if case.shared else case.batch
    per_chunk = max(1, case.n_batch // seqs)
    prefill_s = 0.0
    start = 0
    while start < case.prompt:
        span = min(per_chunk, case.prompt - start)
        tokens = span * seqs
        pairs = seqs * (span * start + span * (span + 1) / 2)
        passes = -(-tokens // case.n_ubatch)
        prefill_s += step_time(packed, experts, 0, 0.0, tokens, seqs * start, pairs, passes, seqs)
        start += span
    decode_s = 0.0
    for j in range(case.output):
        kv = case.batch * (case.prompt + j + 1)
        decode_s += step_time(packed, experts, case.batch, kv, 0, 0.0, 0.0, 1, case.batch)
    out = {
        "tpot_ms": decode_s / case.output * 1e3,
        "output_tps": case.batch * case.output / decode_s,
    }
    if compute:
        out["ttft_ms"] = prefill_s * 1e3
    return out
