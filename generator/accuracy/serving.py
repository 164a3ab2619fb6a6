"""Published serving benchmarks against the engine: one case per measured run.

Each row of ``benchmarks/data/serving_load.csv`` (copied as printed, with its
source) that ``serving_map.yaml`` ties to catalog entries becomes a case: the
device and its tensor-parallel degree, the model and weights, the request
profile, and how the load was offered (``--max-concurrency N``, all prompts at
once, or Poisson arrivals at a rate). The engine runs the same protocol and the
case compares its TTFT, TPOT and output tokens per second with the measured
ones, as ``vllm bench serve`` defines them.

Cases are split for calibration by *curve* (one source document, device, model,
weights and parallel degree): a curve's points are correlated, so they are
fitted, or held out, together.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from backpressure.catalog.loader import Catalog
from backpressure.engine.capacity import estimate, peak_flops
from backpressure.engine.inputs import Constants, Device, Runtime, WeightFormat
from backpressure.engine.rng import Mulberry32
from backpressure.engine.serving import kernel
from backpressure.engine.serving.model import Policy, Server, StepCost
from backpressure.engine.serving.run import Run, serve
from backpressure.engine.serving.spec import host_overlaps, pool_blocks, server
from backpressure.engine.sim.libm import ln
from backpressure.generator import resolve
from backpressure.generator.accuracy.archs import arch_of, known
from backpressure.generator.accuracy.rows import DATA, data_rows, read_cases

METRICS = ("ttft_ms", "tpot_ms", "output_tps")
CONSUMER = frozenset({"rtx-3090", "rtx-4090", "rtx-5090", "l40s"})
_TOTAL_IN = re.compile(r"total input tokens (\d+)")
_TOTAL_OUT = re.compile(r"total generated tokens (\d+)")
_FLAG = re.compile(r"--(max-num-seqs|max-num-batched-tokens)[ =](\d+)")
# vLLM's flag, or SGLang's and TensorRT-LLM's expert-parallel size above 1
_EXPERT_PARALLEL = re.compile(
    r"--enable-expert-parallel|--ep[-_]size[ =](?:[2-9]|\d\d)|expert parallel on"
)
_KV_TOKENS = re.compile(r"GPU KV cache size:? ([\d,]+) tokens")
_KV_GIB = re.compile(r"available KV ([\d.]+) GiB per GPU")
STEADY_REQUESTS_PER_USER = 16  # a closed loop of unknown length is run this long per user
FIXED_LENGTHS = frozenset({"random", "synthetic", "sonnet"})  # datasets of set lengths
# vLLM's ShareGPT sampler keeps a conversation only if both lengths are at least 4
# tokens, the prompt at most 1,024 and prompt plus output at most 2,048
# (vllm/benchmarks/datasets.py, is_valid_sequence), and asks for each
# conversation's own reply length: the outputs of one run spread widely.
SHAREGPT_MIN_TOKENS, SHAREGPT_MAX_TOTAL = 4, 2048


@dataclass(frozen=True, slots=True)
class Case:
    """One measured run and how to replay it."""

    row: int
    source: str
    curve: str
    holdout: bool
    gpu: str
    gpus: int
    model: str
    quant: str
    runtime: str
    framework: str
    version: str
    dataset: str
    prompt: int
    output: int
    requests: int
    users: int
    rate: float | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    measured: Mapping[str, float]
    kv_tokens: int | None = None
    kv_bytes: float | None = None
    expert_parallel: bool = False  # the run dealt the experts out (a launch flag says so)

    @property
    def v1(self) -> bool:
        """A vLLM run of the V1 engine (0.8 and later), the scheduler the engine follows."""
        m = re.match(r"(\d+)\.(\d+)", self.version)
        return self.framework == "vllm" and m is not None and (int(m[1]), int(m[2])) >= (0, 8)

    @property
    def async_scheduling(self) -> bool:
        """A vLLM release that schedules the next step while the device runs this one.

        See :func:`backpressure.engine.serving.spec.host_overlaps` (the sweep's
        profile names its release the same way). The only rows between 0.12
        and 0.25 are of 0.20, six releases past the inferred boundary, so
        its exact release changes nothing.
        """
        return self.v1 and host_overlaps("vllm", self.version)


def _num(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text: str) -> int | None:
    value = _num(text)
    return int(value) if value is not None and value == int(value) else None


def _quant(dtype: str, repo: str, table: Mapping[str, str]) -> str | None:
    word = dtype.strip().split(" ")[0].lower() if dtype.strip() else ""
    if word in table:
        return table[word]
    if word in ("", "not"):
        upper = repo.upper()
        for mark, quant in (("FP8", "fp8"), ("AWQ", "awq-int4"), ("GPTQ", "gptq-int4")):
            if mark in upper:
                return quant
        return "bf16"
    return None


def _lengths(r: Mapping[str, str]) -> tuple[int, int] | None:
    """Mean prompt and output tokens: the totals the source prints, else the nominal lengths."""
    done = _int(r["completed"]) or _int(r["num_prompts"])
    total_in = _TOTAL_IN.search(r["notes"])
    total_out = _TOTAL_OUT.search(r["notes"])
    nominal_in, nominal_out = _int(r["input_len"]), _int(r["output_len"])
    prompt = round(int(total_in.group(1)) / done) if total_in and done else nominal_in
    output = round(int(total_out.group(1)) / done) if total_out and done else nominal_out
    if not prompt or not output or output < 2:
        return None
    return prompt, output


# A sweep a source prints one file per concurrency level (``.../concurrency8_...csv``)
_PER_LEVEL_FILE = re.compile(r"/concurrency\d+_[^/]*$")


def _curve(r: Mapping[str, str], gpu: str, model: str, quant: str, gpus: int) -> str:
    """A row's curve: its source document (one sweep split over files counts once)."""
    doc = _PER_LEVEL_FILE.sub("", r["source"].split("#")[0])
    return "|".join((doc, gpu, model, quant, str(gpus), r["framework"], r["dataset"]))


def _is_holdout(curve: str) -> bool:
    """Half the curves, chosen by a hash of their identity (the same split every run)."""
    return hashlib.sha256(curve.encode()).digest()[0] % 2 == 1


def load_cases(cat: Catalog, data: Path = DATA) -> tuple[list[Case], Counter[str]]:
    """Cases for every comparable row, and why the others were left out.

    A case whose measured TTFT is below :func:`ttft_floor_ms` keeps its other
    metrics but not its TTFT; the count is kept under :data:`TTFT_LEFT_OUT`.
    """
    copies = copied_rows(data / "serving_load.csv")
    cases, skipped = read_cases(
        data / "serving_load.csv",
        data / "serving_map.yaml",
        lambda mapping, i, r: (COPIED, None) if i in copies else _case(cat, mapping, i, r),
    )
    kept = []
    for case in cases:
        ttft, floor = case.measured.get("ttft_ms"), ttft_floor_ms(cat, case)
        if ttft is not None and floor is not None and ttft < floor:
            skipped[TTFT_LEFT_OUT] += 1
            case = replace(
                case, measured={k: v for k, v in case.measured.items() if k != "ttft_ms"}
            )
        kept.append(case)
    return kept, skipped


# Counted with the rows left out, but only the TTFT of these runs is: their TPOT and
# output tokens/s are compared as any other run's.
TTFT_LEFT_OUT = (
    "TTFT only (TPOT and tokens/s still compared): faster than the GPU's peak compute"
    " allows for its prompts, so a prefix cache served them"
)


def ttft_floor_ms(cat: Catalog, case: Case) -> float | None:
    """The least mean TTFT the case's prompts allow when each is computed from scratch [ms].

    A request's first token waits at least for its own prompt: 2 FLOPs per
    multiplied parameter per prompt token at the device's peak rate (attention
    only adds to it). When every prompt arrives at once and all are one length,
    the k-th to finish has waited for k prompts' work, so the mean and the
    median wait at least half the count times one. A measured TTFT below this
    did not compute its prompts: a prefix cache (on by default in vLLM V1 and
    SGLang) already held them, from an earlier run of the same random prompts
    or a warm-up request. Such a TTFT measures the cache, not the device. None
    without a FLOPS figure.
    """
    peak = peak_flops(*_setup(cat, case))
    if not peak:
        return None
    arch = arch_of(cat, case.model)
    one = 2 * (arch.active_params - arch.lookup_only_params) * case.prompt / peak
    at_once = case.rate is None and case.users >= case.requests and case.dataset in FIXED_LENGTHS
    return 1000 * one * (max(1.0, case.requests / 2) if at_once else 1.0)


COPIED = "figures identical to another GPU's or model's run (a copied table)"
# The figures a run's identity shows in: two separate runs never agree on all of them
# to the printed digit.
_RUN_FIGURES = ("duration_s", "mean_ttft_ms", "mean_tpot_ms", "output_throughput")


def copied_rows(table: Path) -> frozenset[int]:
    """Rows whose measured figures repeat, to the last digit, a row of another setup.

    Such a table was copied from one page to another (gpustack's GLM-4.5-Air
    pages print the same vLLM and SGLang runs for 4x A100 and 4x H100), and the
    data cannot say which setup it was measured on, so neither is compared. A run
    quoted twice for the same GPU, model and weights is not a copy.
    """
    rows = data_rows(table.name, table.parent)
    setups: dict[tuple[str, ...], set[tuple[str, str, str]]] = {}
    for r in rows:
        figures = tuple(r[k] for k in _RUN_FIGURES)
        if all(figures):
            setups.setdefault(figures, set()).add((r["gpu"], r["hf_repo"], r["weights_dtype"]))
    return frozenset(
        i for i, r in enumerate(rows) if len(setups.get(tuple(r[k] for k in _RUN_FIGURES), ())) > 1
    )


def _case(
    cat: Catalog, mapping: Mapping[str, Any], i: int, r: Mapping[str, str]
) -> tuple[str, Case | None]:
    gpu = mapping["gpus"].get(r["gpu"])
    model = mapping["models"].get(r["hf_repo"])
    quant = _quant(r["weights_dtype"], r["hf_repo"], mapping["quants"])
    runtime = mapping["frameworks"].get(r["framework"])
    count = _int(r["gpu_count"]) or 1
    tp = _int(r["tensor_parallel"]) or count
    lengths = _lengths(r)
    rate = _num(r["request_rate"]) if r["request_rate"] not in ("inf", "") else None
    users = _int(r["max_concurrency"]) or 0
    requests = _int(r["completed"]) or _int(r["num_prompts"])
    if not requests and users and rate is None:
        requests = STEADY_REQUESTS_PER_USER * users  # a closed loop measured in its steady state
    flags = {k: int(v) for k, v in _FLAG.findall(r["notes"])}
    # Means where the source prints them, else medians (steady closed loops: close to the mean).
    measured = {
        k: v
        for k, v in (
            ("ttft_ms", _num(r["mean_ttft_ms"]) or _num(r["median_ttft_ms"])),
            ("tpot_ms", _num(r["mean_tpot_ms"]) or _num(r["median_tpot_ms"])),
            ("output_tps", _num(r["output_throughput"])),
        )
        if v is not None and v > 0
    }
    checks = (
        (gpu is None or gpu not in cat.gpus, "GPU not in the catalog"),
        (model is None or not known(cat, model), "model not in the catalog"),
        (quant is None or quant not in cat.quants, "weights not mapped"),
        (runtime is None, "framework not mapped"),
        (tp != count or tp not in (1, 2, 4, 8), "not a single tensor-parallel group of 1-8"),
        (
            tp > 1 and r["source"].split("#")[0] in mapping.get("tp_across_pods", ()),
            "tensor parallel across separate pods (link not known)",
        ),
        (lengths is None, "request lengths not known"),
        (not requests, "request count not known"),
        (not measured, "no mean TTFT, TPOT or throughput"),
        (
            r["request_rate"] == "inf" and not users and requests and requests > 4096,
            "more than 4,096 prompts at once",
        ),
    )
    for bad, why in checks:
        if bad:
            return why, None
    assert gpu
    assert model
    assert quant
    assert runtime
    assert lengths
    assert requests
    if rate is None and not users:
        users = requests  # every prompt at once: a closed loop as wide as the run
    if rate is not None and users:
        rate = None  # a concurrency cap under a rate: costed as the closed loop it caps to
    curve = _curve(r, gpu, model, quant, tp)
    return "", Case(
        i,
        r["source"],
        curve,
        _is_holdout(curve),
        gpu,
        tp,
        model,
        quant,
        runtime,
        r["framework"],
        r["framework_version"],
        r["dataset"],
        lengths[0],
        lengths[1],
        requests,
        users,
        rate,
        _int(r["max_num_seqs"]) or flags.get("max-num-seqs"),
        _int(r["max_num_batched_tokens"]) or flags.get("max-num-batched-tokens"),
        measured,
        *_logged_kv(r["notes"], tp),
        _EXPERT_PARALLEL.search(r["notes"]) is not None,
    )


def _logged_kv(notes: str, tp: int) -> tuple[int | None, float | None]:
    """The KV pool the server logged, where the source quotes it: tokens, or GiB per GPU.

    Replaying with the logged pool tests the scheduler and step model apart from
    the memory model (which the KV-capacity report checks on its own).
    """
    tokens = _KV_TOKENS.search(notes)
    if tokens:
        return int(tokens.group(1).replace(",", "")), None
    gib = _KV_GIB.search(notes)
    if gib:
        return None, float(gib.group(1)) * 1024**3 * tp
    return None, None


def device(cat: Catalog, gpu: str, count: int) -> Device:
    """``count`` of a catalog GPU, linked as the catalog's rigs of that GPU are."""
    if count == 1:
        return resolve.device_for(cat, gpu)
    rig = next((g for g in cat.rigs.values() if g.gpu == gpu), None)
    link = rig.interconnect if rig else ("nvlink" if "sxm" in gpu or gpu == "b200" else "pcie")
    bandwidth = rig.interconnect_bandwidth_bytes_per_s if rig else None
    return resolve.device_from_gpu(cat.gpus[gpu], count, link, bandwidth)


def _arrivals(case: Case) -> np.ndarray:
    """Poisson arrivals at the case's rate, seeded by its row (deterministic)."""
    assert case.rate is not None
    rng = Mulberry32(case.row)
    u = rng.block(case.requests)
    gaps = -ln(1.0 - u) / case.rate
    # numpy's stubs type an element of a float array as Any
    first = float(gaps[0])
    return np.cumsum(gaps) - first


@dataclass(frozen=True)
class Replay:
    """A case made ready to run: its server, and the requests of its protocol."""

    server: Server
    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    users: int


def output_lengths(case: Case) -> np.ndarray:
    """Output tokens per request: the mean for fixed-length datasets, spread for ShareGPT.

    A ShareGPT run's replies range from a few tokens to near the sampler's cap,
    and the spread sets how a run drains: the longest replies decode on in a
    thinning batch, and a burst's short replies decode while the rest still
    prefill. The published totals give only the mean, so the replies are taken
    as exponential (median ``ln 2`` = 0.69 of the mean): the ShareGPT rows of
    ``serving_load.csv`` that print mean and median end-to-end latency at low
    concurrency, where latency follows the reply length, have medians of 0.68 to
    0.74 of the mean (SGLang DeepSeek-V3 at 64 users 0.68, 128 users 0.71;
    Qwen3-Next-80B at 1 user 0.74). The lengths are the exponential's
    quantiles at ``(i + 1/2) / n``, clipped to the sampler's bounds, scaled to
    the case's mean, in an order drawn from the case's row (deterministic).
    """
    n = case.requests
    if case.dataset != "sharegpt" or n < 2:
        return np.full(n, case.output, np.int64)
    low = SHAREGPT_MIN_TOKENS
    high = max(SHAREGPT_MAX_TOTAL - case.prompt, low)
    u = (np.arange(n, dtype=np.float64) + 0.5) / n
    spread = -ln(1.0 - u)  # unit-mean exponential quantiles
    excess = max(case.output - low, 0)
    lengths = np.clip(low + excess * spread, low, high)
    for _ in range(3):  # clipping lowers the mean a little: rescale the part above the floor
        above = float(np.mean(lengths)) - low
        if above <= 0:
            break
        lengths = np.clip(low + (lengths - low) * (excess / above), low, high)
    order = np.argsort(Mulberry32(case.row).block(n), kind="stable")
    return np.maximum(np.rint(lengths[order]), 2).astype(np.int64)


def _setup(cat: Catalog, case: Case) -> tuple[Device, Runtime, WeightFormat]:
    """The case's device, its runtime's profile (as the run launched it) and its weights."""
    rt = resolve.runtime_profile(cat.runtimes[case.runtime])
    return (
        device(cat, case.gpu, case.gpus),
        replace(rt, expert_parallel=case.expert_parallel),
        resolve.weight_format(cat.quants[case.quant]),
    )


def prepare(cat: Catalog, case: Case, constants: Constants | None = None) -> Replay | None:
    """The case's server (catalog device, runtime, weights and constants) and its load."""
    dev, rt, fmt = _setup(cat, case)
    c = constants or resolve.constants(cat)
    arch = arch_of(cat, case.model)
    context = min(arch.max_context, max(case.prompt + case.output, 4096))
    kv = resolve.kv_bytes(cat.kv_dtypes["auto"])
    cap = estimate(dev, rt, fmt, c, context, kv, arch=arch)
    srv = server(
        dev,
        rt,
        fmt,
        c,
        arch,
        cap,
        case.prompt,
        case.output,
        1e9,
        math.inf,
        case.max_num_seqs,
        case.max_num_batched_tokens,
    )
    if srv is None:
        return None
    if srv.scheduler.policy is Policy.VLLM:  # the row's release, not the catalog profile's
        srv = replace(srv, cost=replace(srv.cost, host_overlaps=case.async_scheduling))
    kv_tokens = case.kv_tokens
    if kv_tokens is None and case.kv_bytes is not None:
        kv_tokens = int(case.kv_bytes // max(cap.kv_bytes_per_token, 1))
    if kv_tokens is not None and srv.scheduler.policy is Policy.VLLM:
        blocks = pool_blocks(
            cap, kv_tokens // srv.scheduler.block_tokens, case.prompt + case.output - 1
        )
        srv = replace(srv, scheduler=replace(srv.scheduler, kv_blocks=blocks))
    n = case.requests
    arrival = np.zeros(n) if case.rate is None else _arrivals(case)
    return Replay(
        srv,
        arrival,
        np.full(n, case.prompt, np.int64),
        output_lengths(case),
        case.users if case.rate is None else 0,
    )


def run_replay(rep: Replay, cost: StepCost | None = None) -> dict[str, float]:
    """Run a prepared case (with another step cost, when fitting one)."""
    srv = rep.server if cost is None else replace(rep.server, cost=cost)
    return metrics(serve(srv, rep.arrival, rep.prompt, rep.output, users=rep.users))


def replay(cat: Catalog, case: Case, constants: Constants | None = None) -> dict[str, float] | None:
    """The engine's TTFT, TPOT and output tokens/s for the case's protocol."""
    rep = prepare(cat, case, constants)
    return None if rep is None else run_replay(rep)


def metrics(run: Run) -> dict[str, float]:
    """Mean TTFT and TPOT [ms] and output tokens/s, as ``vllm bench serve`` reports them.

    TPOT is ``(e2e - ttft) / (output - 1)`` per request, then averaged; the
    throughput counts output tokens of completed requests over the time from the
    first arrival to the last completion.
    """
    done = run.status == kernel.DONE
    if not done.any():
        return {}
    ttft = run.first[done] - run.arrival[done]
    out = run.output[done]
    tpot = (run.finish[done] - run.first[done]) / np.maximum(out - 1, 1)
    span = float(np.max(run.finish[done]) - np.min(run.arrival))
    return {
        "ttft_ms": float(np.mean(ttft)) * 1e3,
        "tpot_ms": float(np.mean(tpot[out > 1])) * 1e3 if (out > 1).any() else math.nan,
        "output_tps": float(out.sum()) / span if span > 0 else math.nan,
        "running": run.running_s / run.busy_s if run.busy_s > 0 else 0.0,
    }


def with_constants(cat: Catalog, **changes: Any) -> Constants:
    """The catalog's constants with some replaced (for fitting)."""
    return replace(resolve.constants(cat), **changes)
