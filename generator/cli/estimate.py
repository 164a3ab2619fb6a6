"""``backpressure estimate`` and ``backpressure catalog``: parse, call, print."""

from __future__ import annotations

import json
from pathlib import Path

import click
from backpressure.generator.cli.options import (
    COMMAND_SETTINGS,
    CONTEXT,
    BadInput,
    Finite,
    SafePath,
    Whole,
    catalog_option,
    load,
    positive,
)
from backpressure.generator.estimate import (
    AdHocDevice,
    EstimateArgs,
    UserError,
    catalog_json,
    estimate_json,
    run_estimate,
)
from backpressure.generator.report_text import render
from backpressure.generator.resolve import ComboError, LookupError_
from backpressure.generator.serve_once import Load

# Upper bounds far above any real part, so that a unit slip or a typo is refused.
MAX_GB = 1 << 20  # memory and overhead [GiB]
MAX_GBPS = 1e6  # memory bandwidth [GB/s]
MAX_TFLOPS = 1e6
MAX_PARAMS_B = 1e5


def _dump(obj: object) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)


@click.command("estimate", context_settings=COMMAND_SETTINGS)
@click.option("--gpu", help="Catalog GPU or rig id (see `backpressure catalog`).")
@click.option(
    "--vram-gb",
    type=positive(MAX_GB),
    help="Memory printed on the box, e.g. 24 for a 24 GB card (read as GiB).",
)
@click.option(
    "--bandwidth-gbps",
    type=positive(MAX_GBPS),
    help="Peak memory bandwidth of a --vram-gb device [GB/s]; without it the decode "
    "ceiling is not computed.",
)
@click.option(
    "--tflops",
    type=positive(MAX_TFLOPS),
    help="Dense BF16/FP16 peak of a --vram-gb device [TFLOP/s]; without it prefill and "
    "the compute ceiling are not modeled.",
)
@click.option(
    "--memory-kind",
    type=click.Choice(["discrete", "unified", "system"]),
    default="discrete",
    show_default=True,
    help="Memory kind of a --vram-gb device: unified is Apple silicon, system is CPU RAM.",
)
@click.option("--model", help="Catalog model id or Hugging Face repo id.")
@click.option(
    "--model-config",
    type=SafePath(dir_okay=False, path_type=Path),
    help="A Hugging Face config.json read offline.",
)
@click.option(
    "--params-b",
    type=positive(MAX_PARAMS_B),
    help="Parameter count in billions, for a model known only by size; the KV cost "
    "falls back to the catalog's heuristic (kv_heuristic_mib_per_billion).",
)
@click.option("--quant", required=True, help="Weight quant id, e.g. q4_k_m, fp8, bf16.")
@click.option(
    "--context",
    type=CONTEXT,
    required=True,
    help="Context tokens each request reserves: 8192, or 8k, 128k, 1M (k = 1,024 tokens).",
)
@click.option(
    "--gpus",
    type=Whole(min=1, max=64),
    default=1,
    show_default=True,
    help="GPUs of the --gpu model sharing the weights, split as the runtime splits them "
    "(vLLM by heads: the count must divide them; llama.cpp by layers). Not for a rig "
    "id or unified memory.",
)
@click.option(
    "--runtime",
    help="Runtime id, e.g. llama.cpp or vllm (default: the quant's preferred runtime that "
    "serves it on this device).",
)
@click.option(
    "--backend",
    help="llama.cpp on a Radeon (RDNA) GPU: rocm or vulkan, each with its own decode "
    "calibration (default: vulkan there; elsewhere the platform's only one).",
)
@click.option(
    "--gpu-memory-utilization",
    type=Finite(min=0, max=1, min_open=True),
    help="vLLM-style runtimes: share of memory the server claims (default: the runtime's).",
)
@click.option(
    "--kv-dtype",
    default="auto",
    show_default=True,
    help="KV-cache element type: auto, f16, bf16, fp8, q8_0, q4_0.",
)
@click.option(
    "--overhead-gb",
    type=Finite(min=0, max=MAX_GB),
    help="llama.cpp-style runtimes: fixed framework overhead [GiB] (default: the runtime's).",
)
@click.option(
    "--concurrency",
    type=Whole(min=1, max=65_536),
    help="Serve N users in a closed loop and report TTFT, TPOT and throughput.",
)
@click.option(
    "--rps",
    type=positive(1e7),
    help="Offer Poisson arrivals at this rate [requests/s] for the catalog's measurement "
    "window and judge the failure rules.",
)
@click.option(
    "--prompt-tokens",
    type=Whole(min=1, max=1_048_576),
    help="Prompt tokens per request (default: the catalog settings').",
)
@click.option(
    "--output-tokens",
    type=Whole(min=2, max=1_048_576),
    help="Output tokens per request (default: the catalog settings').",
)
@click.option(
    "--max-num-seqs",
    type=Whole(min=1, max=65_536),
    help="vLLM max_num_seqs, or llama.cpp slots (default: the runtime's).",
)
@click.option(
    "--max-num-batched-tokens",
    type=Whole(min=16, max=1_048_576),
    help="vLLM per-step token budget, or llama.cpp n_batch (default: the runtime's).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object instead of the report."
)
@catalog_option
def estimate_command(
    gpu: str | None,
    vram_gb: float | None,
    bandwidth_gbps: float | None,
    tflops: float | None,
    memory_kind: str,
    model: str | None,
    model_config: Path | None,
    params_b: float | None,
    quant: str,
    context: int,
    gpus: int,
    runtime: str | None,
    backend: str | None,
    gpu_memory_utilization: float | None,
    kv_dtype: str,
    overhead_gb: float | None,
    concurrency: int | None,
    rps: float | None,
    prompt_tokens: int | None,
    output_tokens: int | None,
    max_num_seqs: int | None,
    max_num_batched_tokens: int | None,
    as_json: bool,
    catalog_dir: Path | None,
) -> None:
    """Slots, both ceilings, the error band and a one-line verdict for one config.

    With --concurrency or --rps, the same config served under load.
    """
    if (gpu is None) == (vram_gb is None):
        raise BadInput("give exactly one of --gpu ID or --vram-gb X")
    if gpu is not None and (bandwidth_gbps or tflops):
        raise BadInput("--bandwidth-gbps and --tflops describe a --vram-gb device, not --gpu")
    if sum(x is not None for x in (model, model_config, params_b)) != 1:
        raise BadInput("give exactly one of --model, --model-config or --params-b")
    adhoc = None if vram_gb is None else AdHocDevice(vram_gb, bandwidth_gbps, tflops, memory_kind)
    serving_flags = (prompt_tokens, output_tokens, max_num_seqs, max_num_batched_tokens)
    if concurrency is None and rps is None and any(f is not None for f in serving_flags):
        raise BadInput(
            "--prompt-tokens, --output-tokens and the batch limits need --concurrency N or --rps R"
        )
    cat = load(catalog_dir)
    load_ = None
    if concurrency is not None or rps is not None:
        load_ = Load(
            concurrency,
            rps,
            prompt_tokens or cat.settings.prompt_tokens,
            output_tokens or cat.settings.output_tokens,
            max_num_seqs,
            max_num_batched_tokens,
        )
    args = EstimateArgs(
        gpu,
        adhoc,
        model,
        model_config,
        params_b,
        quant,
        context,
        gpus,
        runtime,
        gpu_memory_utilization,
        kv_dtype,
        overhead_gb,
        load_,
        backend,
    )
    try:
        est = run_estimate(cat, args)
    except (UserError, ComboError, LookupError_) as exc:
        raise BadInput(str(exc)) from exc
    click.echo(_dump(estimate_json(est)) if as_json else render(est))


@click.command("catalog", context_settings=COMMAND_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@catalog_option
def catalog_command(as_json: bool, catalog_dir: Path | None) -> None:
    """List the catalog's GPUs, rigs, models, quants and runtimes."""
    cat = load(catalog_dir)
    if as_json:
        click.echo(_dump(catalog_json(cat)))
        return
    for title, table in (
        ("GPUs", cat.gpus),
        ("rigs", cat.rigs),
        ("models", cat.models),
        ("quants", cat.quants),
        ("KV dtypes", cat.kv_dtypes),
        ("runtimes", cat.runtimes),
    ):
        click.echo(f"{title} ({len(table)})")
        for eid, ent in table.items():
            click.echo(f"  {eid:<24} {ent.name}")
