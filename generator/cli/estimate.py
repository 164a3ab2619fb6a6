"""``backpressure estimate`` and ``backpressure catalog``: parse, call, print."""

from __future__ import annotations

import json
from pathlib import Path

import click
from backpressure.generator.cli.options import BadInput, Finite, catalog_option, load, positive
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

# Upper bounds far above any real part, so that a unit slip or a typo is refused.
MAX_GB = 1 << 20  # memory and overhead [GiB]
MAX_GBPS = 1e6  # memory bandwidth [GB/s]
MAX_TFLOPS = 1e6
MAX_PARAMS_B = 1e5


def _dump(obj: object) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)


@click.command("estimate")
@click.option("--gpu", help="Catalog GPU or rig id (see `backpressure catalog`).")
@click.option(
    "--vram-gb",
    type=positive(MAX_GB),
    help="Memory printed on the box, e.g. 24 for a 24 GB card (read as GiB).",
)
@click.option("--bandwidth-gbps", type=positive(MAX_GBPS), help="Peak memory bandwidth [GB/s].")
@click.option("--tflops", type=positive(MAX_TFLOPS), help="Dense BF16/FP16 peak [TFLOP/s].")
@click.option(
    "--memory-kind",
    type=click.Choice(["discrete", "unified", "system"]),
    default="discrete",
    show_default=True,
    help="Memory kind of a --vram-gb device.",
)
@click.option("--model", help="Catalog model id or Hugging Face repo id.")
@click.option(
    "--model-config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A Hugging Face config.json read offline.",
)
@click.option(
    "--params-b",
    type=positive(MAX_PARAMS_B),
    help="Parameter count in billions, for a model known only by size.",
)
@click.option("--quant", required=True, help="Weight quant id, e.g. q4_k_m, fp8, bf16.")
@click.option(
    "--context",
    type=click.IntRange(min=1, max=2**25),
    required=True,
    help="Context tokens each request reserves.",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1, max=64),
    default=1,
    show_default=True,
    help="Number of GPUs (tensor or layer split, as the runtime does it).",
)
@click.option(
    "--runtime", help="Runtime id (default: the quant's preferred runtime for this device)."
)
@click.option(
    "--gpu-memory-utilization",
    type=Finite(min=0, max=1, min_open=True),
    help="vLLM-style share of memory the server claims.",
)
@click.option("--kv-dtype", default="auto", show_default=True, help="KV-cache dtype id.")
@click.option(
    "--overhead-gb",
    type=Finite(min=0, max=MAX_GB),
    help="llama.cpp-style fixed framework overhead [GiB].",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
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
    gpu_memory_utilization: float | None,
    kv_dtype: str,
    overhead_gb: float | None,
    as_json: bool,
    catalog_dir: Path | None,
) -> None:
    """Slots, both ceilings and the error band for one config."""
    if (gpu is None) == (vram_gb is None):
        raise BadInput("give exactly one of --gpu ID or --vram-gb X")
    if gpu is not None and (bandwidth_gbps or tflops):
        raise BadInput("--bandwidth-gbps and --tflops describe a --vram-gb device, not --gpu")
    if sum(x is not None for x in (model, model_config, params_b)) != 1:
        raise BadInput("give exactly one of --model, --model-config or --params-b")
    adhoc = None if vram_gb is None else AdHocDevice(vram_gb, bandwidth_gbps, tflops, memory_kind)
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
    )
    cat = load(catalog_dir)
    try:
        est = run_estimate(cat, args)
    except (UserError, ComboError, LookupError_) as exc:
        raise BadInput(str(exc)) from exc
    click.echo(_dump(estimate_json(est)) if as_json else render(est))


@click.command("catalog")
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
