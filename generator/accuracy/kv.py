"""KV-cache capacity against vLLM startup logs and llama.cpp cache lines.

vLLM rows are checked three ways, so a miss can be placed:

1. allocator: the KV tokens (and "Maximum concurrency") the engine's layout of
   vLLM's pool gives for the KV memory the log itself reports;
2. budget: the KV memory the engine predicts (weights, activation peak,
   non-torch memory, visible memory, by release) against the logged one;
3. end to end: predicted tokens against logged tokens.

The catalog's vLLM constants were fitted on the v0.19.0 H100 rows of
``vllm_kv_cache.csv`` (:data:`FIT_RELEASE`, :data:`FIT_GPU`); every other row, of
either file, is held out.
llama.cpp rows check the cell rule (cells x layers x bytes); nothing is fitted on them.

``benchmarks/calib_kv.py`` prints these checks into the calibration report; the
accuracy page shows them (:func:`kv_context` in ``page``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from backpressure.catalog.loader import Catalog
from backpressure.engine.arch import ModelArch
from backpressure.engine.capacity import batched_seqs, batched_tokens, estimate
from backpressure.engine.inputs import Device, Runtime, WeightFormat
from backpressure.engine.kv_pool import llama_cpp_cells, token_bytes_per_layer, vllm_pool
from backpressure.engine.units import GIB, MIB
from backpressure.generator import resolve
from backpressure.generator.accuracy.archs import (
    extra_archs,
    extra_config,
    extra_quants,
    model_id,
)
from backpressure.generator.accuracy.rows import data_rows

SEQS = re.compile(r"max[_-]num[_-]seqs\W{0,4}(\d+)")
FAMILIES = ("full", "sliding", "hybrid-linear", "hybrid-mamba")
FIT_FILE, FIT_RELEASE, FIT_GPU = "vllm_kv_cache.csv", "0.19.0", "H100 80GB HBM3"

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
    # Both load only the routed experts 4-bit ("Falling back to
    # UnquantizedLinearMethod" for every other Linear layer in cpatonn's logs), which
    # awq-int4 (all Linear layers) does not describe: no catalog quant. cyankiwi's
    # stored layout is known (CHECKPOINTS); no source gives cpatonn's group size, so
    # its logs take the allocator check only.
    "cpatonn/Qwen3-Next-80B-A3B-Instruct-AWQ-4bit": ("qwen3-next-80b-a3b", ""),
    "cyankiwi/Qwen3-Next-80B-A3B-Instruct-AWQ-4bit": ("qwen3-next-80b-a3b", ""),
    "openai/gpt-oss-20b": ("gpt-oss-20b", "mxfp4"),
    "openai/gpt-oss-120b": ("gpt-oss-120b", "mxfp4"),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": ("qwen3-next-80b-a3b", "bf16"),
}
# Quantized checkpoints no catalog quant describes, priced as they are stored for
# the end-to-end check (by hf_repo as in MODELS, whose quant they stand in for).
CHECKPOINTS = {
    # W4A16: symmetric int4 with one 16-bit scale per group of 32 (4 + 16/32 = 4.5
    # bits), on the routed experts only; attention, Gated DeltaNet, shared expert,
    # router and embeddings stay bf16. Group size: the Avarok write-up "We Unlocked
    # NVFP4 on DGX Spark" (2026-02-19, a public GitHub file whose repository the
    # library index does not name, library file id 9766443113: "W4A16,
    # group_size=32"). Experts only: an llm-compressor recipe that follows this
    # checkpoint's (library file id 4937267950: "This matches cyankiwi's saved
    # recipe.yaml which shows only expert layers were quantized"), and the L40S log
    # of vllm_kv_hybrid.csv loads its experts with CompressedTensorsWNA16MarlinMoEMethod.
    "cyankiwi/Qwen3-Next-80B-A3B-Instruct-AWQ-4bit": WeightFormat(
        "W4A16, group 32, routed experts only", 4.5, 16.0, experts_only=True
    ),
}
# ModelOpt's selective NVFP4 recipe for Nemotron 3 Nano (its NVFP4 release's
# hf_quant_config.json, transcribed in 6ixLabs-AI/dgpp@7cc561a
# tests/unit/nemotron_config_json.hpp; the Cascade-2 NVFP4 card says it follows "the
# same selective recipe"): routed and shared experts and the Mamba layers not just
# before an attention layer in NVFP4; attention, those Mamba layers, conv1d, router,
# embeddings and lm_head in BF16.
SELECTIVE_NVFP4 = ("chankhavu/Nemotron-Cascade-2-30B-A3B-NVFP4",)
NVFP4_BITS = 4.5  # catalog/quants/nvfp4.yaml: an FP8 scale per 16 FP4 values


# vLLM's NVFP4 MoE path for FlashInfer and CUTLASS (Blackwell; Hopper runs Marlin,
# which keeps the stored size) pads non-gated experts' intermediate size to the
# swizzled block scales' 128 rows: prepare_nvfp4_moe_layer_for_fi_or_cutlass
# ("pad_size = w13_scale.size(1) - w13.size(1)") in
# https://github.com/vllm-project/vllm/blob/296ce48d53e21b80311c8bea381b9dc1b09317ae/vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py
# and swizzle_blockscale ("M_padded = round_up(M, 128)") in
# https://github.com/vllm-project/vllm/blob/4159f5ba771cb20944234e8e7931ccf9e4258bfb/vllm/model_executor/layers/quantization/utils/nvfp4_utils.py
FLASHINFER_ROWS = 128
FLASHINFER_GENERATIONS = ("blackwell",)


def selective_nvfp4(repo: str, generation: str = "", gpus: int = 1) -> WeightFormat:
    """The weight format of a Nemotron-H checkpoint quantized by ModelOpt's selective recipe.

    Every layer outside the embeddings is costed at one average: NVFP4 for the
    quantized projections, 16 bits for the rest. On a GPU where vLLM runs the
    FlashInfer path (``generation``), the routed experts (squared-ReLU, not
    gated) are held at their intermediate size per GPU padded to 128 rows.
    """
    cfg, arch = extra_config(repo), extra_archs()[repo]
    hidden, pattern = cfg["hidden_size"], cfg["hybrid_override_pattern"]
    inner = cfg["mamba_num_heads"] * cfg["mamba_head_dim"]
    groups = 2 * cfg["n_groups"] * cfg["ssm_state_size"]
    mamba = hidden * (2 * inner + groups + cfg["mamba_num_heads"]) + inner * hidden
    kept = sum(1 for i, c in enumerate(pattern) if c == "M" and pattern[i + 1 : i + 2] == "*")
    e = arch.experts
    if e is None:
        raise ValueError(f"{repo}: the selective NVFP4 recipe needs a mixture of experts")
    quantized = (pattern.count("M") - kept) * mamba
    quantized += e.moe_layers * (e.num_experts * e.expert_params + e.shared_params_per_layer)
    body = arch.total_params - arch.embedding_params
    stored = quantized
    if generation in FLASHINFER_GENERATIONS:
        width = cfg["moe_intermediate_size"] // gpus
        pad = -(-width // FLASHINFER_ROWS) * FLASHINFER_ROWS - width
        stored += e.moe_layers * e.num_experts * e.expert_params * pad // width
    bits = (stored * NVFP4_BITS + (body - quantized) * 16) / body
    return WeightFormat("NVFP4, selective (ModelOpt)", bits, 16.0)


GPUS = {
    "H100 80GB HBM3": "h100-sxm",
    "H100": "h100-sxm",
    "H200": "h200-sxm",
    "A100 40GB": "a100-40gb-sxm",
    "A100 80GB": "a100-80gb-sxm",
    "RTX 3060": "rtx-3060-12gb",
    "RTX 3090": "rtx-3090",
    "RTX 4090": "rtx-4090",
    "RTX 5090": "rtx-5090",
    "L40S": "l40s",
}
# GPUs outside the catalog: memory (GiB, as the box prints it) and vendor, from the
# vendors' product pages; only the memory budget needs them.
OFF_CATALOG = {
    "Radeon AI PRO R9700": (
        32,
        "amd",
        "https://www.amd.com/en/products/graphics/workstations/radeon-ai-pro/ai-9000-series/amd-radeon-ai-pro-r9700.html",
    ),
    "H100 SXM5 94GB": (
        94,
        "nvidia",
        "https://github.com/SURF-ML/Megatron-LM-Snellius/blob/81e501241290d73122440ae06e37aab57ef1af7d/README.md",
    ),
    "RTX 5000 Ada": (
        32,
        "nvidia",
        "https://www.nvidia.com/en-us/design-visualization/rtx-5000/",
    ),
}
# llama.cpp cache lines: model string -> catalog model.
LLAMA_CPP_MODELS = {
    "gemma-3-1b-it": "gemma-3-1b",
    "Llama-3.2-1B-Instruct": "llama-3.2-1b",
    "Qwen3-32B": "qwen3-32b",
    "gpt-oss-20b": "gpt-oss-20b",
}


@dataclass(frozen=True, slots=True)
class VllmKv:
    """One vLLM startup log's KV lines against the engine."""

    source: str  # the data file
    url: str  # where the log is published
    held_out: bool
    gpu: str
    count: int
    model: str
    family: str  # "full", "sliding", "hybrid-linear" or "mla"
    version: str
    context: int
    logged: int  # KV tokens the log prints
    logged_conc: float | None
    alloc: int | None = None  # tokens for the logged KV memory
    alloc_conc: float | None = None
    logged_kv_gib: float | None = None
    e2e: int | None = None  # tokens the engine predicts from the device alone
    budget_gib: float | None = None  # per GPU
    weights_gib: float | None = None  # per GPU
    logged_weights_gib: float | None = None
    band: int | None = None  # the capacity band the config page would show [%]

    @property
    def error(self) -> float | None:
        """End-to-end predicted over logged tokens, minus one [-]."""
        return None if self.e2e is None else self.e2e / self.logged - 1

    @property
    def inside(self) -> bool | None:
        """Whether the end-to-end error lies within the band."""
        err = self.error
        return None if err is None or self.band is None else abs(err) * 100 <= self.band


@dataclass(frozen=True, slots=True)
class LlamaCppKv:
    """One llama.cpp cache line against the cell rule."""

    model: str
    ctx: int
    part: str  # "unified", "SWA" or "non-SWA"
    swa_full: bool
    cells: int
    logged_cells: str
    layers: int
    predicted_mib: float
    logged_mib: float
    url: str

    @property
    def error(self) -> float:
        """Predicted over logged size, minus one [-]."""
        return self.predicted_mib / self.logged_mib - 1


def family_of(cat: Catalog, mid: str) -> str:
    """A model's KV family: how its layers hold context (full, sliding, MLA, hybrid)."""
    return family(cat.archs[mid])


def family(arch: ModelArch) -> str:
    """The KV family of an architecture (see :func:`family_of`)."""
    if arch.recurrent is not None:
        return f"hybrid-{arch.recurrent.kind}"
    if arch.attention.mla_latent_dim:
        return "mla"
    return "sliding" if arch.attention.windowed_layers else "full"


def _gpu(name: str) -> str | None:
    return GPUS.get(name.split(" (")[0])


def _device(cat: Catalog, gpu: str | None, name: str, count: int) -> Device | None:
    link = "pcie" if count > 1 else None
    if gpu is not None:
        return resolve.device_from_gpu(cat.gpus[gpu], count, link)
    off = OFF_CATALOG.get(name.split(" (")[0].removesuffix(" 32GB"))
    if off is None:
        return None
    gib, vendor, _ = off
    return Device(name, "discrete", vendor, gib * GIB, None, count=count, interconnect=link)  # type: ignore[arg-type]


def _mnbt(cat: Catalog, gpu: str | None, raw: str) -> int:
    if raw:
        return int(raw)
    runtime = resolve.runtime_profile(cat.runtimes["vllm"])
    if gpu is None:
        return runtime.max_num_batched_tokens
    # the engine's rule, small defaults on any A100 included (arg_utils.py, PR #17885)
    return batched_tokens(runtime, resolve.device_from_gpu(cat.gpus[gpu]))


def pinned(runtime: Runtime, seqs: int, tokens: int) -> Runtime:
    """The runtime with a log's ``max_num_seqs`` and ``max_num_batched_tokens`` on any GPU."""
    return replace(
        runtime,
        max_num_seqs=seqs,
        large_gpu_max_num_seqs=seqs,
        max_num_batched_tokens=tokens,
        large_gpu_max_num_batched_tokens=tokens,
    )


def _seqs(row: dict[str, str]) -> int | None:
    """``max_num_seqs`` as the log's arguments print it (copied into the notes or model)."""
    m = SEQS.search(f"{row['model']} {row.get('notes', '')}")
    return int(m.group(1)) if m else None


def vllm_checks(cat: Catalog) -> list[VllmKv]:
    """One record per usable vLLM log row: logged and predicted numbers."""
    out: list[VllmKv] = []
    for source in (FIT_FILE, "vllm_kv_hybrid.csv"):
        for r in data_rows(source):
            fitted = (source, r["vllm_version"], r["gpu"]) == (FIT_FILE, FIT_RELEASE, FIT_GPU)
            repo = r["hf_repo"].split(" (")[0]
            extra = extra_archs().get(repo)
            # a model the site does not publish is named by its repo; without a quant
            # (a quantized checkpoint the catalog does not describe): allocator only
            if extra:
                mid, quant = model_id(repo), extra_quants().get(repo, "")
            else:
                mid, quant = MODELS.get(repo, ("", ""))
            arch = extra or cat.archs.get(mid)
            if arch is None or not r["kv_cache_tokens"]:
                continue
            gpu = _gpu(r["gpu"])
            if gpu not in cat.gpus:  # a catalog without the GPU (a test's small one)
                gpu = None
            count = int(r["gpu_count"].split()[0])
            context = int(r["max_model_len"].split()[0]) if r["max_model_len"] else 2048
            kv = "fp8" if r["kv_cache_dtype"].startswith("fp8") else "auto"
            kv_bytes = resolve.kv_bytes(cat.kv_dtypes[kv])
            mnbt = _mnbt(cat, gpu, r.get("max_num_batched_tokens", ""))
            pool = vllm_pool(arch, kv_bytes, context, mnbt, count)
            point = VllmKv(
                source=source,
                url=r["source"],
                held_out=not fitted,
                gpu=r["gpu"].split(" (")[0],
                count=count,
                model=mid,
                family=family(arch),
                version=r["vllm_version"],
                context=context,
                logged=int(r["kv_cache_tokens"]),
                logged_conc=float(r["max_concurrency"]) if r["max_concurrency"] else None,
            )
            if r["available_kv_gib"]:
                avail = int(float(r["available_kv_gib"]) * GIB)
                point = replace(
                    point,
                    alloc=pool.reported_tokens(avail),
                    alloc_conc=pool.max_concurrency(avail),
                    logged_kv_gib=float(r["available_kv_gib"]),
                )
            device = _device(cat, gpu, r["gpu"], count)
            fmt = CHECKPOINTS.get(repo)
            if repo in SELECTIVE_NVFP4:
                fmt = selective_nvfp4(repo, device.generation if device else "", count)
            if fmt is None and quant in cat.quants:
                fmt = resolve.weight_format(cat.quants[quant])
            if device is not None and r["gpu_memory_utilization"] and fmt is not None:
                runtime = resolve.runtime_profile(cat.runtimes["vllm"])
                runtime = replace(
                    pinned(runtime, _seqs(r) or batched_seqs(runtime, device), mnbt),
                    gpu_memory_utilization=float(r["gpu_memory_utilization"]),
                    version=r["vllm_version"] or runtime.version,
                )
                res = estimate(
                    device,
                    runtime,
                    fmt,
                    resolve.constants(cat),
                    context,
                    kv_bytes,
                    arch=arch,
                )
                point = replace(
                    point,
                    e2e=res.kv_capacity_tokens,
                    budget_gib=res.kv_budget_bytes / count / GIB,
                    weights_gib=res.weights_bytes / count / GIB,
                    logged_weights_gib=float(r["model_weights_gib"] or 0) or None,
                    band=res.error_band_pct,
                )
            out.append(point)
    return out


def llama_cpp_checks(cat: Catalog) -> list[LlamaCppKv]:
    """llama.cpp's logged cache sizes against its cell rule (every row held out)."""
    out: list[LlamaCppKv] = []
    for r in data_rows("llamacpp_kv.csv"):
        mid = LLAMA_CPP_MODELS.get(r["model"].split(" (")[0])
        if mid is None or mid not in cat.archs:
            continue
        if not r["engine"].startswith("llama.cpp") or "via" in r["engine"]:
            continue
        ctx_text = r["n_ctx"].split()[0] if r["n_ctx"] else ""
        if not ctx_text.isdigit():
            continue
        a = cat.archs[mid].attention
        ctx = int(ctx_text)
        swa_full = r["swa_full"].startswith("true")
        part = r["cache_part"]
        windows = [w for w in a.window_per_layer if (w > 0) == (part == "SWA")]
        if part.startswith("unified"):
            windows = list(a.window_per_layer)
        cells = llama_cpp_cells(windows[0], ctx, 512, 1, swa_full) if windows else 0
        out.append(
            LlamaCppKv(
                model=mid,
                ctx=ctx,
                part=part,
                swa_full=swa_full,
                cells=cells,
                logged_cells=r["cells"] or "-",
                layers=len(windows),
                predicted_mib=len(windows) * cells * token_bytes_per_layer(a, 2.0) / MIB,
                logged_mib=float(r["size_mib"]),
                url=r["source"],
            )
        )
    return out
