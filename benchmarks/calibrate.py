"""Calibration report: the engine against public measurements.

1. Single-stream decode (llama-bench tg128 rows): fits, per platform, the share of
   datasheet bandwidth a decode step achieves and a fixed per-step overhead
   (1/tps = weight_bytes / (efficiency x bandwidth) + overhead), then reports the
   error of the engine's prediction with the catalog's constants.
2. Prompt processing (pp512 rows): the model-FLOPs utilization where the device
   has a FLOPS figure in the catalog.
3. KV-cache size (vLLM startup logs): predicted KV tokens against logged ones.

Run: ``python benchmarks/calibrate.py`` (or ``make bench``). Prints medians and the
share of points inside the published error band.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.engine.bands import error_band
from backpressure.engine.capacity import estimate
from backpressure.engine.ceilings import StepModel
from backpressure.engine.units import GIB
from backpressure.generator import resolve

DATA = Path(__file__).resolve().parent / "data"
PLATFORMS = ("nvidia", "amd", "apple", "cpu")


def _rows(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _hardware() -> dict[tuple[str, str], dict[str, str]]:
    return {(r["hardware"], r["backend"]): r for r in _rows("hardware.csv")}


def decode_points() -> list[dict[str, float | str]]:
    """tg128 rows joined with their device bandwidth."""
    hw = _hardware()
    out: list[dict[str, float | str]] = []
    for r in _rows("llama_bench.csv"):
        h = hw.get((r["hardware"], r["backend"]))
        if r["test"] != "tg128" or not h or not h["bandwidth_gb_s"] or not r["model_size_gib"]:
            continue
        platform = "cpu" if r["backend"] == "CPU" else h["platform"]
        if platform not in PLATFORMS:
            continue
        out.append(
            {
                "hardware": r["hardware"],
                "backend": r["backend"],
                "platform": platform,
                "size_bytes": float(r["model_size_gib"]) * GIB,
                "params": float(r["model_params_b"] or 6.74) * 1e9,
                "layers": 80.0 if r["model"] == "llama 70B" else 32.0,
                "bandwidth": float(h["bandwidth_gb_s"]) * 1e9,
                "tps": float(r["tokens_per_s"]),
            }
        )
    return out


def fit(points: list[dict[str, float | str]]) -> dict[str, tuple[float, float, int]]:
    """Per platform: (efficiency, overhead per layer [s], n), least squares on 1/tps.

    ``1/tps = (bytes / bandwidth) / efficiency + layers x overhead``.
    """
    fits = {}
    for platform in PLATFORMS:
        pts = [p for p in points if p["platform"] == platform]
        if len(pts) < 3:
            continue
        x = np.array(
            [[float(p["size_bytes"]) / float(p["bandwidth"]), float(p["layers"])] for p in pts]
        )
        y = np.array([1.0 / float(p["tps"]) for p in pts])
        (inv_eff, per_layer), *_ = np.linalg.lstsq(x, y, rcond=None)
        if per_layer < 0 or inv_eff < 1:  # unphysical (negative cost, efficiency > 1): refit
            inv_eff, per_layer = float(np.dot(x[:, 0], y) / np.dot(x[:, 0], x[:, 0])), 0.0
        fits[platform] = (1.0 / float(inv_eff), float(per_layer), len(pts))
    return fits


def predict_tps(cat: Catalog, p: dict[str, float | str]) -> float:
    """The engine's single-stream decode speed for one llama-bench row."""
    c = resolve.constants(cat)
    platform = str(p["platform"])
    step = StepModel(
        weights_bytes=int(p["size_bytes"]),
        total_params=int(p["params"]),
        active_params=int(p["params"]),
        experts=None,
        kv_bytes_per_token=0.0,
        bandwidth_bytes_per_s=c.bandwidth_efficiency[platform] * float(p["bandwidth"]),
        overhead_s=float(p["layers"]) * c.layer_overhead_s[platform],
        compute_per_seq_s=0.0,
    )
    return 1.0 / step.step_time_s(1, 0)


def band_pct(p: dict[str, float | str]) -> int:
    """The published band for a 7B dense model on this kind of device."""
    kind = {"cpu": "system", "apple": "unified"}.get(str(p["platform"]), "discrete")
    if p["backend"] in ("ROCm", "Vulkan") and "iGPU" in str(p["hardware"]):
        kind = "unified"
    return error_band(kind, int(p["params"]), 1, False, False, True, True, 100).pct


def decode_report(cat: Catalog) -> None:
    """Fit and error of single-stream decode speed."""
    points = decode_points()
    print(f"decode: {len(points)} tg128 rows with a known bandwidth")
    for platform, (eff, over, n) in fit(points).items():
        print(
            f"  fit {platform:<6} efficiency {eff:.3f}  overhead {over * 1e6:.1f} us/layer  (n={n})"
        )
    errors, inside = [], 0
    for p in points:
        err = predict_tps(cat, p) / float(p["tps"]) - 1
        errors.append(abs(err))
        inside += abs(err) * 100 <= band_pct(p)
    print(
        f"  catalog constants: median |error| {statistics.median(errors) * 100:.1f} %, "
        f"inside band {inside}/{len(points)} = {inside / len(points) * 100:.0f} %"
    )


def prefill_report(cat: Catalog) -> None:
    """Model-FLOPs utilization of pp512 rows on catalog devices with a FLOPS figure."""
    hw = _hardware()
    shares = []
    for r in _rows("llama_bench.csv"):
        h = hw.get((r["hardware"], r["backend"]))
        if r["test"] != "pp512" or not h or not h["catalog_id"] or not r["model_params_b"]:
            continue
        gpu = cat.gpus[h["catalog_id"]]
        flops = gpu.bf16_flops_per_s
        # FLOPS calibrated from these very rows would make the check circular.
        if not flops or not gpu.sources["bf16_flops_per_s"].startswith("http"):
            continue
        shares.append(float(r["tokens_per_s"]) * 2 * float(r["model_params_b"]) * 1e9 / flops)
    if not shares:
        print("prefill: no pp512 rows on catalog devices with FLOPS")
        return
    used = resolve.constants(cat).prefill_compute_efficiency
    errors = [abs(used / s - 1) for s in shares]
    print(
        f"prefill: {len(shares)} pp512 rows; MFU median {statistics.median(shares):.3f} "
        f"(min {min(shares):.3f}, max {max(shares):.3f}); with {used}: median |error| "
        f"{statistics.median(errors) * 100:.1f} %"
    )


# vLLM log rows that match catalog entries: model string -> (model id, quant id).
VLLM_MODELS = {
    "Llama-3.1-8B-Instruct": ("llama-3.1-8b", "bf16"),
    "Llama-3.3-70B-Instruct (FP8-dynamic weights)": ("llama-3.3-70b", "fp8"),
    "Qwen2.5-7B-Instruct": ("qwen2.5-7b", "bf16"),
    "Qwen3-14B": ("qwen3-14b", "bf16"),
    "Qwen3-235B-A22B-FP8": ("qwen3-235b-a22b", "fp8"),
    "Meta-Llama-3.1-405B-Instruct-FP8": ("llama-3.1-405b", "fp8"),
    "DeepSeek-R1-Distill-Qwen-14B": ("qwen2.5-14b", "bf16"),
}
VLLM_GPUS = {
    "H100 80GB HBM3": "h100-sxm",
    "H100": "h100-sxm",
    "A100 40GB": "a100-40gb-sxm",
    "RTX 3090": "rtx-3090",
    "RTX 4090": "rtx-4090",
}


def kv_report(cat: Catalog) -> None:
    """Predicted against logged vLLM KV-cache tokens."""
    errors, inside, shown = [], 0, []
    for r in _rows("vllm_kv_cache.csv"):
        model = VLLM_MODELS.get(r["model"])
        gpu = VLLM_GPUS.get(r["gpu"])
        if not model or not gpu or not r["kv_cache_tokens"] or model[0] not in cat.models:
            continue
        count = int(r["gpu_count"])
        device = resolve.device_from_gpu(cat.gpus[gpu], count, "nvlink" if count > 1 else None)
        runtime = resolve.runtime_profile(cat.runtimes["vllm"])
        runtime = replace(runtime, gpu_memory_utilization=float(r["gpu_memory_utilization"]))
        kv = "fp8" if r["kv_cache_dtype"].startswith("fp8") else "auto"
        res = estimate(
            device,
            runtime,
            resolve.weight_format(cat.quants[model[1]]),
            resolve.constants(cat),
            2048,
            resolve.kv_bytes(cat.kv_dtypes[kv]),
            arch=cat.archs[model[0]],
        )
        logged = int(r["kv_cache_tokens"])
        predicted = res.kv_capacity_tokens
        err = predicted / logged - 1
        errors.append(abs(err))
        inside += abs(err) * 100 <= res.error_band_pct
        shown.append(
            f"  {count}x {gpu:<14} {model[0]:<16} kv {kv:<4} logged {logged:>9,} "
            f"predicted {predicted:>9,} ({err * 100:+.1f} %, band ±{res.error_band_pct})"
        )
    print(f"KV tokens: {len(errors)} vLLM logs matching catalog entries")
    print("\n".join(shown))
    if errors:
        print(
            f"  median |error| {statistics.median(errors) * 100:.1f} %, "
            f"inside band {inside}/{len(errors)}"
        )


# decode_serving.csv rows that match catalog entries.
SERVING_GPUS = {
    "H100": "h100-sxm",
    "H100 SXM": "h100-sxm",
    "H200": "h200-sxm",
    "A100": "a100-80gb-sxm",
    "A100 80GB SXM (330W power limit)": "a100-80gb-sxm",
}
SERVING_MODELS = {
    "DeepSeek-V3": "deepseek-v3",
    "DeepSeek-R1-0528": "deepseek-r1",
    "Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen3-14B": "qwen3-14b",
    "Mixtral-8x7B": "mixtral-8x7b",
    "Mixtral-8x7B-Instruct-v0.1": "mixtral-8x7b",
    "Llama-3.1-8B": "llama-3.1-8b",
    "Llama-3.1-70B": "llama-3.3-70b",
    "Llama-3.3-70B-Instruct": "llama-3.3-70b",
    "Qwen3-8B": "qwen3-8b",
}
SERVING_QUANTS = {
    "bf16": "bf16",
    "": "bf16",
    "fp8": "fp8",
    "q5_k_m": "q5_k_m",
    "q4_k_m": "q4_k_m",
    "q8_0": "q8_0",
    "awq": "awq-int4",
}


def serving_points(cat: Catalog) -> list[tuple[dict[str, str], float, float, bool]]:
    """(row, measured tok/s, predicted tok/s, is_moe) for rows that map to the catalog."""
    out = []
    for r in _rows("decode_serving.csv"):
        gpu, model = SERVING_GPUS.get(r["gpu"]), SERVING_MODELS.get(r["model"])
        quant = SERVING_QUANTS.get(r["weights_dtype"])
        if not (gpu and model and quant) or r["framework"] not in (
            "vllm",
            "sglang",
            "llama.cpp",
            "gpt-fast",
        ):
            continue
        value = float(r["value"])
        measured = 1000.0 / value if r["metric"] in ("tpot_ms", "itl_ms") else value
        count = int(r["gpu_count"])
        runtime = "llama.cpp" if r["framework"] == "llama.cpp" else "vllm"
        profile = resolve.runtime_profile(cat.runtimes[runtime])
        device = resolve.device_from_gpu(cat.gpus[gpu], count, "nvlink" if count > 1 else None)
        if count > 1 and runtime == "vllm" and cat.gpus[gpu].memory_bytes * count < 0:
            continue
        res = estimate(
            device,
            profile,
            resolve.weight_format(cat.quants[quant]),
            resolve.constants(cat),
            2048,
            2.0,
            arch=cat.archs[model],
        )
        if res.decode_tokens_per_s is None:
            continue
        out.append((r, measured, res.decode_tokens_per_s, cat.archs[model].is_moe))
    return out


def _expert_reads(cat: Catalog, r: dict[str, str]) -> int:
    """Routed-expert matrix products per decode step: MoE layers x experts per token."""
    e = cat.archs[SERVING_MODELS[r["model"]]].experts
    assert e is not None
    return e.moe_layers * e.experts_per_token


def serving_report(cat: Catalog) -> None:
    """Single-stream decode of served models (tensor parallel, MoE) against measurements."""
    pts = serving_points(cat)
    print(f"serving decode: {len(pts)} batch-1 rows matching catalog entries")
    errors, inside = [], 0
    for r, measured, predicted, _ in pts:
        err = predicted / measured - 1
        dev = resolve.device_from_gpu(cat.gpus[SERVING_GPUS[r["gpu"]]], int(r["gpu_count"]))
        band = error_band(
            dev.memory_kind,
            cat.archs[SERVING_MODELS[r["model"]]].total_params,
            dev.count,
            cat.archs[SERVING_MODELS[r["model"]]].is_moe,
            False,
            True,
            True,
            100,
        ).pct
        errors.append(abs(err))
        inside += abs(err) * 100 <= band
        print(
            f"  {r['gpu_count']}x {r['gpu'][:12]:<12} {r['framework']:<9} {r['model'][:20]:<20} "
            f"{r['weights_dtype'] or 'bf16':<6} measured {measured:7.1f} "
            f"predicted {predicted:7.1f} "
            f"({err * 100:+.0f} %, band ±{band})"
        )
    if errors:
        print(
            f"  median |error| {statistics.median(errors) * 100:.1f} %, "
            f"inside band {inside}/{len(errors)}"
        )
    current = resolve.constants(cat).moe_expert_overhead_s
    implied = [
        max(0.0, (1 / measured - 1 / predicted) / _expert_reads(cat, r) + current)
        for r, measured, predicted, moe in pts
        if moe
    ]
    if implied:
        print(
            f"  fit moe_expert_overhead_s: median {statistics.median(implied) * 1e6:.1f} us "
            f"per routed expert per layer over {len(implied)} MoE rows"
        )


def main() -> None:
    """Print the calibration report."""
    cat = load_catalog()
    decode_report(cat)
    serving_report(cat)
    prefill_report(cat)
    kv_report(cat)


if __name__ == "__main__":
    main()
