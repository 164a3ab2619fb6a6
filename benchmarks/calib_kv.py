"""KV-cache sections of the calibration report: vLLM startup logs and llama.cpp cache lines.

vLLM rows are checked three ways, so a miss can be placed:

1. allocator: the KV tokens (and "Maximum concurrency") the engine's layout of
   vLLM's pool gives for the KV memory the log itself reports;
2. budget: the KV memory the engine predicts (weights, activation peak,
   non-torch memory, visible memory, by release) against the logged one;
3. end to end: predicted tokens against logged tokens.

The catalog's vLLM constants were fitted on the v0.19.0 H100 rows of
``vllm_kv_cache.csv``; every row of ``vllm_kv_hybrid.csv`` is held out.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import replace
from pathlib import Path

from backpressure.catalog.loader import Catalog
from backpressure.engine.capacity import batched_tokens, estimate
from backpressure.engine.inputs import Device
from backpressure.engine.kv_pool import llama_cpp_cells, token_bytes_per_layer, vllm_pool
from backpressure.engine.units import GIB, MIB
from backpressure.generator import resolve

DATA = Path(__file__).resolve().parent / "data"

# hf_repo (as logged, up to the first space) -> (catalog model, quant). Qwen2-7B has
# Qwen2.5-7B's KV shape (28 layers x 4 KV heads x 128) and vocabulary; its weights
# differ by 0.04B, so it is used for the allocator and budget checks alike.
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": ("llama-3.1-8b", "bf16"),
    "meta-llama/Meta-Llama-3.1-8B-Instruct": ("llama-3.1-8b", "bf16"),
    "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic": ("llama-3.3-70b", "fp8"),
    "Qwen/Qwen2.5-7B-Instruct": ("qwen2.5-7b", "bf16"),
    "Qwen/Qwen2-7B-Instruct": ("qwen2.5-7b", "bf16"),
    "Qwen/Qwen3-14B": ("qwen3-14b", "bf16"),
    "RedHatAI/Qwen3-14B-FP8-dynamic": ("qwen3-14b", "fp8"),
    "Qwen/Qwen3-235B-A22B-FP8": ("qwen3-235b-a22b", "fp8"),
    "meta-llama/Meta-Llama-3.1-405B-Instruct-FP8": ("llama-3.1-405b", "fp8"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": ("qwen2.5-14b", "bf16"),
    "meta-llama/Llama-3.1-8B": ("llama-3.1-8b", "bf16"),
    "RedHatAI/gemma-3-12b-it-FP8-dynamic": ("gemma-3-12b", "fp8"),
    "RedHatAI/gemma-3-27b-it-FP8-dynamic": ("gemma-3-27b", "fp8"),
    "cpatonn/Qwen3-Coder-30B-A3B-Instruct-GPTQ-4bit": ("qwen3-coder-30b-a3b", "gptq-int4"),
    "cpatonn/Qwen3-Next-80B-A3B-Instruct-AWQ-4bit": ("qwen3-next-80b-a3b", "awq-int4"),
    "openai/gpt-oss-20b": ("gpt-oss-20b", "mxfp4"),
    "openai/gpt-oss-120b": ("gpt-oss-120b", "mxfp4"),
}
GPUS = {
    "H100 80GB HBM3": "h100-sxm",
    "H100": "h100-sxm",
    "A100 40GB": "a100-40gb-sxm",
    "A100 80GB": "a100-80gb-sxm",
    "RTX 3090": "rtx-3090",
    "RTX 4090": "rtx-4090",
    "RTX 5090": "rtx-5090",
}
# GPUs outside the catalog: memory (GiB, as the box prints it) and vendor, from the
# vendors' product pages; only the memory budget needs them.
OFF_CATALOG = {
    "Radeon AI PRO R9700": (
        32,
        "amd",
        "https://www.amd.com/en/products/graphics/workstations/radeon-ai-pro/ai-9000-series/amd-radeon-ai-pro-r9700.html",
    ),
    "RTX 5000 Ada": (
        32,
        "nvidia",
        "https://www.nvidia.com/en-us/design-visualization/rtx-5000/",
    ),
}


def _rows(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _family(cat: Catalog, mid: str) -> str:
    arch = cat.archs[mid]
    if arch.recurrent is not None:
        return "hybrid-linear"
    if arch.attention.mla_latent_dim:
        return "mla"
    return "sliding" if arch.attention.windowed_layers else "full"


def _gpu(name: str) -> str | None:
    name = name.split(" (")[0]
    return GPUS.get(name)


def _device(cat: Catalog, gpu: str | None, name: str, count: int) -> Device | None:
    link = "pcie" if count > 1 else None
    if gpu is not None:
        return resolve.device_from_gpu(cat.gpus[gpu], count, link)
    off = OFF_CATALOG.get(name.split(" (")[0].removesuffix(" 32GB"))
    if off is None:
        return None
    gib, vendor, _ = off
    return Device(name, "discrete", vendor, gib * GIB, None, count=count, interconnect=link)  # type: ignore[arg-type]


def _mnbt(cat: Catalog, gpu: str | None, raw: str, gpu_name: str) -> int:
    if raw:
        return int(raw)
    runtime = resolve.runtime_profile(cat.runtimes["vllm"])
    if gpu is None:
        return runtime.max_num_batched_tokens
    # vLLM keeps the small defaults on any A100 (arg_utils.py, PR #17885).
    if "A100" in gpu_name:
        return runtime.max_num_batched_tokens
    return batched_tokens(runtime, resolve.device_from_gpu(cat.gpus[gpu]))


def vllm_points(cat: Catalog) -> list[dict[str, object]]:
    """One record per usable vLLM log row: logged and predicted numbers."""
    out: list[dict[str, object]] = []
    for source, held_out in (("vllm_kv_cache.csv", False), ("vllm_kv_hybrid.csv", True)):
        for r in _rows(source):
            repo = r["hf_repo"].split(" (")[0]
            model = MODELS.get(repo)
            if not model or not r["kv_cache_tokens"] or model[0] not in cat.models:
                continue
            mid, quant = model
            gpu = _gpu(r["gpu"])
            count = int(r["gpu_count"].split()[0])
            context = int(r["max_model_len"].split()[0]) if r["max_model_len"] else 2048
            kv = "fp8" if r["kv_cache_dtype"].startswith("fp8") else "auto"
            kv_bytes = resolve.kv_bytes(cat.kv_dtypes[kv])
            mnbt = _mnbt(cat, gpu, r.get("max_num_batched_tokens", ""), r["gpu"])
            arch = cat.archs[mid]
            pool = vllm_pool(arch, kv_bytes, context, mnbt, count)
            point: dict[str, object] = {
                "source": source,
                "held_out": held_out,
                "gpu": r["gpu"].split(" (")[0],
                "count": count,
                "model": mid,
                "family": _family(cat, mid),
                "version": r["vllm_version"],
                "logged": int(r["kv_cache_tokens"]),
                "logged_conc": float(r["max_concurrency"]) if r["max_concurrency"] else None,
            }
            if r["available_kv_gib"]:
                avail = int(float(r["available_kv_gib"]) * GIB)
                point["alloc"] = pool.reported_tokens(avail)
                point["alloc_conc"] = pool.max_concurrency(avail)
                point["logged_kv_gib"] = float(r["available_kv_gib"])
            device = _device(cat, gpu, r["gpu"], count)
            if device is not None and r["gpu_memory_utilization"]:
                runtime = resolve.runtime_profile(cat.runtimes["vllm"])
                runtime = replace(
                    runtime,
                    gpu_memory_utilization=float(r["gpu_memory_utilization"]),
                    version=r["vllm_version"] or runtime.version,
                    max_num_batched_tokens=mnbt,
                    large_gpu_max_num_batched_tokens=mnbt,
                )
                res = estimate(
                    device,
                    runtime,
                    resolve.weight_format(cat.quants[quant]),
                    resolve.constants(cat),
                    context,
                    kv_bytes,
                    arch=arch,
                )
                point["e2e"] = res.kv_capacity_tokens
                point["budget_gib"] = res.kv_budget_bytes / count / GIB
                point["weights_gib"] = res.weights_bytes / count / GIB
                point["logged_weights_gib"] = float(r["model_weights_gib"] or 0) or None
                point["band"] = res.error_band_pct
            out.append(point)
    return out


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
    pts = vllm_points(cat)
    print(f"KV tokens (vLLM startup logs): {len(pts)} rows matching catalog models")
    print("  rows of vllm_kv_cache.csv fitted the vLLM constants; vllm_kv_hybrid.csv is held out")
    for p in pts:
        alloc = p.get("alloc")
        e2e = p.get("e2e")
        parts = [
            f"  {p['count']}x {str(p['gpu'])[:20]:<20} {p['model']!s:<20} {p['family']!s:<13}"
            f" v{str(p['version'])[:7]:<7} logged {p['logged']:>9,}"
        ]
        if alloc is not None:
            parts.append(f"alloc {_err(float(alloc), float(p['logged'])) * 100:+5.1f} %")  # type: ignore[arg-type]
        if e2e is not None:
            err = _err(float(e2e), float(p["logged"]))  # type: ignore[arg-type]
            parts.append(f"e2e {e2e:>9,} ({err * 100:+6.1f} %, band ±{p['band']})")
        if p.get("budget_gib") is not None and p.get("logged_kv_gib") is not None:
            parts.append(f"KV GiB {p['budget_gib']:.2f} vs {p['logged_kv_gib']:.2f}")
        if p.get("logged_weights_gib"):
            parts.append(f"weights GiB {p['weights_gib']:.2f} vs {p['logged_weights_gib']:.2f}")
        print("  ".join(parts))
    held = [p for p in pts if p["held_out"]]
    for fam in ("full", "sliding", "hybrid-linear"):
        rows = [p for p in held if p["family"] == fam]
        alloc = [_err(float(p["alloc"]), float(p["logged"])) for p in rows if "alloc" in p]  # type: ignore[arg-type]
        conc = [
            _err(float(p["alloc_conc"]), float(p["logged_conc"]))  # type: ignore[arg-type]
            for p in rows
            if "alloc_conc" in p and p["logged_conc"]
        ]
        e2e = [_err(float(p["e2e"]), float(p["logged"])) for p in rows if "e2e" in p]  # type: ignore[arg-type]
        inside = sum(
            abs(_err(float(p["e2e"]), float(p["logged"]))) * 100 <= float(p["band"])  # type: ignore[arg-type]
            for p in rows
            if "e2e" in p
        )
        print(f"  held out, {fam}:")
        print(_summary("allocator (tokens from the logged KV memory)", alloc))
        print(_summary("allocator (Maximum concurrency line)", conc))
        print(_summary("end to end (budget + allocator)", e2e))
        if e2e:
            print(f"    inside band {inside}/{len(e2e)}")
    fitted = [
        _err(float(p["e2e"]), float(p["logged"]))  # type: ignore[arg-type]
        for p in pts
        if not p["held_out"] and "e2e" in p
    ]
    print(_summary("fitted rows (vllm_kv_cache.csv), end to end", fitted))


# llama.cpp cache lines: model string -> catalog model.
LLAMA_CPP_MODELS = {
    "gemma-3-1b-it": "gemma-3-1b",
    "Llama-3.2-1B-Instruct": "llama-3.2-1b",
    "Qwen3-32B": "qwen3-32b",
    "gpt-oss-20b": "gpt-oss-20b",
}


def llamacpp_kv_report(cat: Catalog) -> None:
    """llama.cpp's logged cache sizes against its cell rule (every row held out)."""
    shown, errors = [], []
    for r in _rows("llamacpp_kv.csv"):
        mid = LLAMA_CPP_MODELS.get(r["model"].split(" (")[0])
        if mid is None or not r["engine"].startswith("llama.cpp") or "via" in r["engine"]:
            continue
        arch = cat.archs[mid]
        a = arch.attention
        ctx_text = r["n_ctx"].split()[0] if r["n_ctx"] else ""
        if not ctx_text.isdigit():
            continue
        ctx = int(ctx_text)
        swa_full = r["swa_full"].startswith("true")
        part = r["cache_part"]
        windows = [w for w in a.window_per_layer if (w > 0) == (part == "SWA")]
        if part.startswith("unified"):
            windows = list(a.window_per_layer)
        cells = llama_cpp_cells(windows[0], ctx, 512, 1, swa_full) if windows else 0
        size = len(windows) * cells * token_bytes_per_layer(a, 2.0) / MIB
        logged = float(r["size_mib"])
        err = size / logged - 1
        errors.append(err)
        logged_cells = r["cells"] or "-"
        shown.append(
            f"  {mid:<14} n_ctx {ctx:>6} {part[:8]:<8} swa_full {swa_full!s:<5} "
            f"cells {cells:>6} (logged {logged_cells:>6}) layers {len(windows):>2} "
            f"{size:9.2f} MiB vs {logged:9.2f} ({err * 100:+.1f} %)"
        )
    print(f"KV cache (llama.cpp log lines): {len(errors)} rows matching catalog models")
    print("\n".join(shown))
    print(_summary("llama.cpp cells x layers x bytes", errors))
