"""vLLM's profiled activation peak against the engine, from startup logs that print it.

vLLM 0.19 logs the torch peak of its profiling run ("torch peak memory
increase"). The engine's figure (:func:`~backpressure.engine.capacity.activation_bytes`)
is the larger of the sampler's peak, one fitted figure per logit of
``max_num_seqs`` x vocabulary, and the forward pass's, plus the fused-MoE
workspace; the last two are counted from the architecture, not fitted.

The per-logit figure is fitted on the dense models of one half of the rows (by a
hash of the model) and the rows of the other half are held out; the catalog's
figure is fitted the same way on the dense rows of both halves.

Known miss: gpt-oss-20b at TP 2 reads +22 %. In vLLM 0.19.0 (read in its wheel)
the bf16 experts run the Triton fused-MoE kernel, whose workspace the worker's
workspace manager keeps allocated (``v1/worker/workspace.py``), so it adds to
the sampler's peak; MXFP4 experts on Hopper run triton_kernels' monolithic
``matmul_ogs`` path, whose buffers are freed when the layer returns. The engine
charges the workspace for every MoE model: one MXFP4 log is too few to model
the exception by.
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass, replace

from backpressure.catalog.loader import Catalog
from backpressure.engine.arch import ModelArch
from backpressure.engine.capacity import activation_bytes, sampler_logits
from backpressure.engine.inputs import Device, Runtime
from backpressure.engine.units import GIB
from backpressure.generator import resolve
from backpressure.generator.accuracy.archs import extra_archs, model_id
from backpressure.generator.accuracy.kv import GPUS, MODELS, pinned
from backpressure.generator.accuracy.rows import data_rows

DATA = "vllm_activation.csv"
# the same base models as MODELS names, for the rows' other checkpoints of them
ALIASES = {
    "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic": "qwen2.5-7b",
    "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8": "qwen2.5-7b",
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8": "llama-3.1-8b",
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": "llama-3.1-8b",
    "redhatai/Llama-3.3-70B-Instruct-quantized.w8a8": "llama-3.3-70b",
    "RedHatAI/Mistral-Small-3.1-24B-Instruct-2503-quantized.w8a8": "mistral-small-24b",
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": "mistral-small-24b",
    "microsoft/phi-4": "phi-4",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mixtral-8x7b",
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-v2-lite",
    "google/gemma-2-2b-it": "gemma-2-2b",
    "google/gemma-2-9b-it": "gemma-2-9b",
    "google/gemma-2-27b-it": "gemma-2-27b",
    "google/gemma-3-12b-it": "gemma-3-12b",
    "google/gemma-3-27b-it": "gemma-3-27b",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "llama-4-scout",
    "Qwen/Qwen2.5-72B-Instruct": "qwen2.5-72b",
    # Kimi-Dev-72B is a fine-tune of Qwen2.5-72B (its model card); same shapes
    "moonshotai/Kimi-Dev-72B": "qwen2.5-72b",
    "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen/Qwen3-8B": "qwen3-8b",
}

# Dense checkpoints outside the catalog, by the three config.json keys the peak
# depends on (vocab_size, hidden_size, intermediate_size); checked, never fitted.
SHAPES = {
    # https://huggingface.co/codellama/CodeLlama-7b-hf/blob/b9a2245269bc292b887c39da6667c631888f209e/config.json
    "codellama/CodeLlama-7b-hf": (32016, 4096, 11008),
    # https://huggingface.co/ibm-granite/granite-3.1-8b-instruct/blame/96fedcdf5764b7e36d2737d129bc07caff913e72/config.json
    "ibm-granite/granite-3.1-8b-instruct": (49155, 4096, 12800),
    # vllm-project/vllm-spyre@f6a83ce12faf6e99e51c8380fba6a90359825e09
    # tests/fixtures/model_configs/ibm-granite/granite-3.3-8b-instruct/config.json
    "ibm-granite/granite-3.3-8b-instruct": (49159, 4096, 12800),
    # henryhmko/VLM_interpretability@53ca1a9 phi-2/config.json
    "microsoft/phi-2": (51200, 2560, 10240),
}
SHAPE_IDS = frozenset(model_id(repo) for repo in SHAPES)
SHAPE_BASE = "llama-3.1-8b"  # a dense catalog model whose other fields the peak ignores


@dataclass(frozen=True, slots=True)
class Activation:
    """One startup log's torch activation peak against the engine's."""

    model: str
    repo: str
    tp: int
    dtype: str
    logged_gib: float
    predicted_gib: float
    sampler_share: float  # the sampler's peak over the logged one [-]
    held_out: bool
    url: str

    @property
    def error(self) -> float:
        """Predicted over logged peak, minus one [-]."""
        return self.predicted_gib / self.logged_gib - 1


def _arch(cat: Catalog, repo: str) -> tuple[str, ModelArch | None]:
    shape = SHAPES.get(repo)
    if shape is not None and SHAPE_BASE in cat.archs:
        vocab, hidden, width = shape
        base = cat.archs[SHAPE_BASE]
        arch = replace(base, vocab_size=vocab, hidden_size=hidden, intermediate_size=width)
        return model_id(repo), arch
    extra = extra_archs().get(repo)
    if extra is not None:
        return model_id(repo), extra
    mid = ALIASES.get(repo) or MODELS.get(repo, ("", ""))[0]
    return mid, cat.archs.get(mid)


def held_out(model: str) -> bool:
    """The half a model's rows fall in: a stable hash of its id; SHAPES are held out."""
    if model in SHAPE_IDS:
        return True
    return hashlib.sha256(model.encode()).digest()[0] % 2 == 1


def _runtime(cat: Catalog, row: dict[str, str], per_logit: float) -> Runtime:
    runtime = resolve.runtime_profile(cat.runtimes["vllm"])
    runtime = pinned(runtime, int(row["max_num_seqs"]), int(row["max_num_batched_tokens"]))
    return replace(runtime, version=row["vllm_version"], sampler_bytes_per_logit=per_logit)


def _rows(cat: Catalog) -> list[tuple[dict[str, str], str, ModelArch, Device]]:
    out = []
    for r in data_rows(DATA):
        mid, arch = _arch(cat, r["hf_repo"])
        gpu = GPUS.get(r["gpu"])
        # pipeline parallel (not modeled) and fp32 weights (not a serving format)
        if arch is None or gpu not in cat.gpus or r["pipeline_parallel_size"] != "1":
            continue
        if r["dtype"] == "float32":
            continue
        tp = int(r["tensor_parallel_size"])
        out.append((r, mid, arch, resolve.device_from_gpu(cat.gpus[gpu], tp, None)))
    return out


def fit_per_logit(cat: Catalog, half: bool | None = None) -> float:
    """Median sampler peak per logit of the dense rows (of one half, or all) [bytes].

    0 where the catalog describes none of those rows' models.
    """
    ratios = []
    for r, mid, arch, device in _rows(cat):
        skip = arch.experts is not None or mid in SHAPE_IDS
        if skip or (half is not None and held_out(mid) != half):
            continue
        logits = sampler_logits(_runtime(cat, r, 1.0), device, arch)
        ratios.append(float(r["torch_peak_gib"]) * GIB / logits)
    return statistics.median(ratios) if ratios else 0.0


def activation_checks(cat: Catalog) -> list[Activation]:
    """Every usable row against the engine, with the figure fitted on the other half."""
    per_logit = fit_per_logit(cat, half=False)
    if not per_logit:
        return []
    out = []
    for r, mid, arch, device in _rows(cat):
        runtime = _runtime(cat, r, per_logit)
        logged = float(r["torch_peak_gib"])
        sampler = per_logit * sampler_logits(runtime, device, arch) / GIB
        out.append(
            Activation(
                model=mid,
                repo=r["hf_repo"],
                tp=device.count,
                dtype=r["dtype"] or "auto",
                logged_gib=logged,
                predicted_gib=activation_bytes(runtime, device, arch) / GIB,
                sampler_share=sampler / logged,
                held_out=held_out(mid),
                url=r["source"],
            )
        )
    return out
