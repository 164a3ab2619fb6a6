"""vLLM's hybrid KV-cache manager in the serving loop: a sliding-window or state layer
group holds only its window (or one page) per request, so long requests fit where the
"GPU KV cache size" line, which counts every group by length, says they would not."""

from __future__ import annotations

import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.engine.serving.run import closed_loop
from backpressure.engine.serving.spec import pool_blocks, server
from backpressure.generator import resolve


def _server(gpu: str, model: str, quant: str, prompt: int, output: int, context: int):
    cfg = resolve.configure(load_catalog(), gpu, quant, context, model, runtime="vllm")
    cap = cfg.capacity()
    srv = server(
        cfg.device, cfg.runtime, cfg.fmt, cfg.constants, cfg.arch, cap, prompt, output, 1e9, 1e9
    )
    assert srv is not None
    return cap, srv


@pytest.mark.parametrize(
    ("model", "quant"),
    [("gpt-oss-120b", "mxfp4"), ("gemma-3-27b", "bf16"), ("qwen3-next-80b-a3b", "fp8")],
)
def test_windowed_and_state_groups_hold_more_long_requests_than_the_reported_line(
    model: str, quant: str
) -> None:
    cap, srv = _server("h200-sxm", model, quant, 32_000, 100, 32_768)
    reported = cap.kv_capacity_tokens // srv.scheduler.block_tokens
    assert srv.scheduler.kv_blocks > reported
    # as many 32,099-token requests as the pool's pages hold at their size
    pool = cap.kv_pool
    assert pool is not None
    fit = srv.scheduler.kv_blocks // -(-32_099 // pool.block)
    assert fit == reported * pool.groups // pool.held_pages(32_099)


def test_a_full_attention_pool_is_its_reported_line() -> None:
    cap, srv = _server("h100-sxm", "llama-3.1-8b", "bf16", 1_024, 128, 8_192)
    assert srv.scheduler.kv_blocks == cap.kv_capacity_tokens // srv.scheduler.block_tokens
    assert pool_blocks(cap, 1_000, 1_151) == 1_000


def test_two_long_requests_share_a_pool_that_reports_room_for_one() -> None:
    # gpt-oss-120b on one A100 80GB: "GPU KV cache size" ~45.7k tokens, under two
    # 32k prompts counted at every layer; its 18 sliding layers keep 128 tokens each.
    cap, srv = _server("a100-80gb-sxm", "gpt-oss-120b", "mxfp4", 32_000, 100, 32_768)
    assert cap.kv_capacity_tokens < 2 * 32_100
    run = closed_loop(srv, users=4, requests=8, prompt=32_000, output=100)
    assert run.running_s / run.busy_s > 1.5
