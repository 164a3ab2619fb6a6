"""Calibration report: the engine against public measurements.

1. Single-stream decode, dense (llama-bench tg128 rows) and mixture-of-experts
   (llama-bench MoE rows, depth runs included): fitted on one half of the rows,
   checked on the other (``calib_decode.py``).
2. Served single-stream decode (vLLM, SGLang, llama.cpp, gpt-fast batch-1 rows).
3. Prompt processing (pp512 rows): the model-FLOPs utilization where the device
   has a FLOPS figure in the catalog.
4. KV-cache size: vLLM startup logs (allocator, budget, end to end) and
   llama.cpp cache lines (``calib_kv.py``).

Run: ``python benchmarks/calibrate.py`` (or ``make bench``). Prints medians and the
share of points inside the published error band.
"""

from __future__ import annotations

import statistics

import calib_decode
import calib_kv
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.engine.bands import error_band
from backpressure.engine.capacity import estimate
from backpressure.generator import resolve
from backpressure.generator.accuracy.rows import data_rows


def _hardware() -> dict[tuple[str, str], dict[str, str]]:
    return {(r["hardware"], r["backend"]): r for r in data_rows("hardware.csv")}


def prefill_report(cat: Catalog) -> None:
    """Model-FLOPs utilization of pp512 rows on catalog devices with a FLOPS figure."""
    hw = _hardware()
    shares = []
    for r in data_rows("llama_bench.csv"):
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
    for r in data_rows("decode_serving.csv"):
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
            None,
            True,
            True,
            100,
            dev.platform,
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


def main() -> None:
    """Print the calibration report."""
    cat = load_catalog()
    calib_decode.dense_report(cat)
    calib_decode.moe_report(cat)
    serving_report(cat)
    prefill_report(cat)
    calib_kv.activation_report(cat)
    calib_kv.kv_report(cat)
    calib_kv.llamacpp_kv_report(cat)


if __name__ == "__main__":
    main()
