"""KV-cache sections of the calibration report: vLLM startup logs and llama.cpp cache lines.

The rows, the three checks and the split are in ``backpressure.generator.accuracy.kv``
(the accuracy page shows the same checks); this prints them as the report's lines.

The activation peak of vLLM 0.19 follows its profiling run (the larger of the
sampler's peak over ``max_num_seqs`` x vocabulary logits and the forward pass's,
plus the fused-MoE workspace), checked on the logs that print it
(:func:`activation_report`). An earlier try applied the same form to every
release and was rejected: the v0.10-0.13 rows at 32-64 sequences and 2,048
batched tokens fit one figure per batched token better (held-out full-attention
median 2.1 % against 5.2 %), and their logs print no peak to say why. Releases
before 0.19 therefore keep that figure.

Looked at and not adopted: charging the tensor-parallel extra (2.05 GiB per
GPU, non-torch memory of the vLLM 0.19 H100 logs at TP 2 and 4) only where
NCCL can use NVLink SHARP (Hopper or later on NVSwitch), since an older H100
log (vLLM pull request 10511: non_torch_memory 1.79 GiB at TP 1, 3.58 GiB at
TP 2) shows the same step, while the logs without NVLink SHARP leave less
of it: two A100s on vLLM 0.10.1 0.1-1.1 GiB, two RTX 4090s 0.2 GiB, two
R9700s on vLLM 0.13 0.0-0.4 GiB (full attention). The same two R9700s on
vLLM 0.11.2 keep all of it (their four TP 2 rows sit at -1.5 to +4.1 % with
it, +10 to +14 % without), so the data tie the extra to the release and its
all-reduce backend as much as to the link, and one rule by link would trade
one set of misses for another.
"""

from __future__ import annotations

import statistics

from backpressure.catalog.loader import Catalog
from backpressure.generator.accuracy.activation import DATA, activation_checks, fit_per_logit
from backpressure.generator.accuracy.kv import (
    FAMILIES,
    FIT_FILE,
    FIT_GPU,
    FIT_RELEASE,
    llama_cpp_checks,
    vllm_checks,
)


def _err(pred: float, logged: float) -> float:
    return pred / logged - 1


def _summary(label: str, errors: list[float]) -> str:
    if not errors:
        return f"  {label}: no rows"
    med = statistics.median(abs(e) for e in errors) * 100
    worst = max(map(abs, errors)) * 100
    return f"  {label}: {len(errors)} rows, median |error| {med:.1f} %, worst {worst:.1f} %"


def kv_report(cat: Catalog) -> None:
    """vLLM's logged KV tokens against the allocator layout and the full prediction."""
    pts = vllm_checks(cat)
    print(
        f"KV tokens (vLLM startup logs): {len(pts)} rows matching catalog models"
        " (or an architecture of benchmarks/data/calibration_archs.yaml)"
    )
    print(
        f"  the v{FIT_RELEASE} {FIT_GPU} rows of {FIT_FILE} fitted the vLLM constants;"
        " every other row is held out"
    )
    for p in pts:
        parts = [
            f"  {p.count}x {p.gpu[:20]:<20} {p.model:<20} {p.family:<13}"
            f" v{p.version[:7]:<7} logged {p.logged:>9,}"
        ]
        if p.alloc is not None:
            parts.append(f"alloc {_err(p.alloc, p.logged) * 100:+5.1f} %")
        if p.e2e is not None:
            err = _err(p.e2e, p.logged)
            parts.append(f"e2e {p.e2e:>9,} ({err * 100:+6.1f} %, band ±{p.band})")
        if p.budget_gib is not None and p.logged_kv_gib is not None:
            parts.append(f"KV GiB {p.budget_gib:.2f} vs {p.logged_kv_gib:.2f}")
        if p.logged_weights_gib:
            parts.append(f"weights GiB {p.weights_gib:.2f} vs {p.logged_weights_gib:.2f}")
        print("  ".join(parts))
    held = [p for p in pts if p.held_out]
    for fam in FAMILIES:
        rows = [p for p in held if p.family == fam]
        alloc = [_err(p.alloc, p.logged) for p in rows if p.alloc is not None]
        conc = [
            _err(p.alloc_conc, p.logged_conc)
            for p in rows
            if p.alloc_conc is not None and p.logged_conc
        ]
        e2e = [p.error for p in rows if p.error is not None]
        inside = sum(bool(p.inside) for p in rows)
        print(f"  held out, {fam}:")
        print(_summary("allocator (tokens from the logged KV memory)", alloc))
        print(_summary("allocator (Maximum concurrency line)", conc))
        print(_summary("end to end (budget + allocator)", e2e))
        if e2e:
            print(f"    inside band {inside}/{len(e2e)}")
    fitted = [p.error for p in pts if not p.held_out and p.error is not None]
    print(_summary(f"fitted rows (v{FIT_RELEASE} {FIT_GPU}), end to end", fitted))


def llamacpp_kv_report(cat: Catalog) -> None:
    """llama.cpp's logged cache sizes against its cell rule (every row held out)."""
    rows = llama_cpp_checks(cat)
    print(f"KV cache (llama.cpp log lines): {len(rows)} rows matching catalog models")
    print(
        "\n".join(
            f"  {r.model:<14} n_ctx {r.ctx:>6} {r.part[:8]:<8} swa_full {r.swa_full!s:<5} "
            f"cells {r.cells:>6} (logged {r.logged_cells:>6}) layers {r.layers:>2} "
            f"{r.predicted_mib:9.2f} MiB vs {r.logged_mib:9.2f} ({r.error * 100:+.1f} %)"
            for r in rows
        )
    )
    print(_summary("llama.cpp cells x layers x bytes", [r.error for r in rows]))


def activation_report(cat: Catalog) -> None:
    """vLLM's logged torch activation peak against the engine's, by model."""
    pts = activation_checks(cat)
    print(
        f"Activation peak (vLLM startup logs that print it, {DATA}): {len(pts)} rows with"
        " a known architecture; the sampler's figure per logit is fitted on the dense"
        f" models of one half ({fit_per_logit(cat, half=False):.2f} bytes; all dense rows:"
        f" {fit_per_logit(cat):.2f}) and every other row is held out"
    )
    for p in pts:
        side = "held out" if p.held_out else "fit half"
        print(
            f"  {p.tp}x {p.model:<24} {p.dtype:<8} logged {p.logged_gib:5.2f} GiB"
            f"  predicted {p.predicted_gib:5.2f} ({p.error * 100:+5.1f} %)"
            f"  sampler {p.sampler_share * 100:3.0f} % of it  {side}"
        )
    for label, held in (("held out", True), ("fit half", False)):
        print(_summary(label, [p.error for p in pts if p.held_out is held]))
