"""A measured TTFT faster than peak compute allows is a prefix-cache hit, not the device."""

from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path

import pytest
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.generator.accuracy.rows import DATA
from backpressure.generator.accuracy.serving import (
    TTFT_LEFT_OUT,
    Case,
    load_cases,
    ttft_floor_ms,
)

A100_BF16 = 312e12  # catalog/gpus/a100-80gb-sxm.yaml


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


def _row(prompts: int, prompt: int, ttft_ms: float, dataset: str = "random") -> dict[str, str]:
    with (DATA / "serving_load.csv").open(newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    row = dict.fromkeys(header, "")
    row.update(
        gpu="A100 SXM 80GB",
        gpu_count="1",
        framework="vllm",
        framework_version="0.10.1.1",
        hf_repo="Qwen/Qwen2-7B-Instruct",
        weights_dtype="bf16",
        tensor_parallel="1",
        dataset=dataset,
        input_len=str(prompt),
        output_len="128",
        num_prompts=str(prompts),
        completed=str(prompts),
        request_rate="inf",
        mean_ttft_ms=str(ttft_ms),
        mean_tpot_ms="12.0",
        output_throughput="80.0",
        source=f"https://example.org/bench.md#L{prompts}{prompt}",
    )
    return row


def _cases(tmp_path: Path, cat: Catalog, rows: list[dict[str, str]]) -> tuple[list[Case], int]:
    shutil.copy(DATA / "serving_map.yaml", tmp_path / "serving_map.yaml")
    with (tmp_path / "serving_load.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    cases, skipped = load_cases(cat, tmp_path)
    return cases, skipped[TTFT_LEFT_OUT]


def test_one_prompt_waits_at_least_for_its_own_flops_at_peak(tmp_path: Path, cat: Catalog) -> None:
    (case,), _ = _cases(tmp_path, cat, [_row(1, 1024, 500.0)])
    arch = cat.archs["qwen2.5-7b"]
    streamed = arch.active_params - arch.lookup_only_params
    assert ttft_floor_ms(cat, case) == pytest.approx(1000 * 2 * streamed * 1024 / A100_BF16)
    # 7.1B multiplied parameters, 1,024 prompt tokens: about 47 ms at 312 TFLOP/s
    assert 40 < ttft_floor_ms(cat, case) < 55


def test_prompts_of_one_length_sent_at_once_wait_for_half_of_each_other(
    tmp_path: Path, cat: Catalog
) -> None:
    one, fifty, spread = _cases(
        tmp_path,
        cat,
        [_row(1, 1024, 500.0), _row(50, 1024, 5000.0), _row(50, 1024, 5000.0, "sharegpt")],
    )[0]
    assert ttft_floor_ms(cat, fifty) == pytest.approx(25 * ttft_floor_ms(cat, one))
    # ShareGPT prompts differ in length: only each request's own prompt bounds its wait
    assert ttft_floor_ms(cat, spread) == pytest.approx(ttft_floor_ms(cat, one))
    paced = dataclasses.replace(fifty, rate=2.0)
    assert ttft_floor_ms(cat, paced) == pytest.approx(ttft_floor_ms(cat, one))


def test_a_ttft_below_the_floor_is_left_out_and_the_rest_of_the_run_kept(
    tmp_path: Path, cat: Catalog
) -> None:
    # 20 prompts of 1,024 tokens at once need at least 10 x 47 ms: 195 ms came from a cache
    cases, left_out = _cases(tmp_path, cat, [_row(20, 1024, 195.0), _row(20, 1024, 900.0)])
    assert left_out == 1
    cached, cold = cases
    assert "ttft_ms" not in cached.measured
    assert cached.measured == {"tpot_ms": 12.0, "output_tps": 80.0}
    assert cold.measured["ttft_ms"] == 900.0
