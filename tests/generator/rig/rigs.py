"""Seeded random rigs for the port's comparison tests, and the runners on both sides.

``generated(n, seed)`` gives ``n`` rig fragments: trees of one to six nodes of
every part and discipline, every load shape, both arrival kinds, LLM nodes on a
few catalog configs (vLLM and llama.cpp, dense and MoE, one GPU and a rig),
loads from idle to several times what the graph serves. The same seed gives the
same rigs. ``python_ticks`` runs one through the Python engine, ``node_jobs``
a batch through the JavaScript engine in Node.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine.rng import Mulberry32
from backpressure.generator.paths import ROOT
from backpressure.generator.rig.build import run, spec_of
from backpressure.generator.rig.data import ConfigRef, device_json, index_json
from backpressure.generator.rig.doc import parse
from backpressure.generator.simulate import tick_lines

NODE = shutil.which("node")
RUNNER = Path(__file__).resolve().parent / "js" / "node_run.mjs"
NO_NODE = "node (a second JavaScript engine) is not installed"

# Configs the generated LLM nodes run on: (config id, runtime).
CONFIGS = (
    ("rtx-4090--llama-3.1-8b--q4_k_m--8k", "llama.cpp"),
    ("h100-sxm--llama-3.1-8b--fp8--8k", "vllm"),
    ("h100-sxm--mixtral-8x7b--fp8--32k", "vllm"),
    ("2x-rtx-4090--llama-3.3-70b--q4_k_m--8k", "llama.cpp"),
    ("m2-ultra-192gb--mixtral-8x7b--q4_k_m--8k", "llama.cpp"),
    # sliding-window layers: vLLM's hybrid pool, converted at each node's profile
    ("h100-sxm--gpt-oss-20b--mxfp4--32k", "vllm"),
)
PARTS = ("app-tier", "postgres", "queue", "llm-server")


def refs() -> list[ConfigRef]:
    """The configs of :data:`CONFIGS` as the site's data files list them."""
    out = []
    for cid, runtime in CONFIGS:
        device, model, quant, ctx, _ = [*cid.split("--"), ""]
        context = int(ctx[:-1]) * 1024
        out.append(ConfigRef(cid, device, model, quant, context, "auto", runtime))
    return out


@functools.cache
def _data(root: Path) -> tuple[str, str]:
    from backpressure.catalog.loader import load_catalog

    cat = load_catalog()
    rows = refs()
    devices = {r.gpu: device_json(cat, r.gpu, [x for x in rows if x.gpu == r.gpu]) for r in rows}
    return json.dumps(index_json(cat, rows)), json.dumps(devices)


def data(cat: Catalog) -> tuple[dict[str, Any], dict[str, Any]]:
    """The builder's index and device files for :data:`CONFIGS` (what the site ships)."""
    index, devices = _data(cat.root)
    return json.loads(index), json.loads(devices)


class _Draw:
    def __init__(self, seed: int) -> None:
        self.rng = Mulberry32(seed)

    def u(self) -> float:
        return self.rng()

    def pick(self, items: Any) -> Any:
        return items[int(self.u() * len(items))]

    def num(self, lo: float, hi: float, log: bool = False, digits: int = 3) -> float:
        x = lo * (hi / lo) ** self.u() if log else lo + (hi - lo) * self.u()
        return float(f"{x:.{digits}g}")

    def chance(self, p: float) -> bool:
        return self.u() < p


def _queue_fields(d: _Draw, discipline: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("discipline", discipline)]
    if discipline == "shed":
        out.append(("max_depth", None))
    elif discipline == "buffer":
        out += [("max_depth", int(d.num(1, 3000, log=True))), ("max_age_s", d.num(0.3, 40))]
    else:
        out.append(("max_depth", int(d.num(1, 800, log=True)) if d.chance(0.7) else 0))
        out.append(("max_age_s", d.num(0.3, 40) if d.chance(0.7) else None))
    out.append(("lifo", d.chance(0.5)))
    if d.chance(0.5):
        out.append(("lifo_after_s", d.num(0.1, 3)))
    return out


def _node(d: _Draw, name: str, part: str) -> tuple[list[tuple[str, Any]], float]:
    """A node's fields and a rough guess of what it serves [requests/s]."""
    discipline = d.pick(("shed", "buffer", "block", "buffer"))
    fields = _queue_fields(d, discipline)
    if part == "app-tier":
        workers, service = int(d.num(1, 64, log=True)), d.num(0.001, 0.05, log=True)
        fields += [("workers", workers), ("service_time_s", service)]
        return fields, workers / service
    if part == "postgres":
        pool, query = int(d.num(1, 50, log=True)), d.num(0.001, 0.05, log=True)
        fields += [("pool_size", pool), ("query_time_s", query)]
        return fields, pool / query
    if part == "queue":
        rate = d.num(10, 5000, log=True)
        fields += [("throughput_rps", rate), ("service_time_s", d.num(0.0005, 0.01, log=True))]
        return fields, rate
    cid = d.pick(CONFIGS)[0]
    prompt, output = int(d.num(32, 4096, log=True)), int(d.num(8, 512, log=True))
    fields += [("config", cid), ("prompt_tokens", prompt), ("output_tokens", output)]
    return fields, 3.0


def _text(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def generated_one(seed: int) -> str:
    """One random rig's fragment."""
    d = _Draw(seed)
    count = 1 + int(d.u() * 6)
    names = [f"n{i}" for i in range(count)]
    parts = [d.pick(PARTS) if d.chance(0.85) else "llm-server" for _ in names]
    after = ["load"] + [
        d.pick(["load", *names[:i]]) if d.chance(0.8) else names[i - 1] for i in range(1, count)
    ]
    # a node after an LLM is allowed, but most graphs keep the models at the leaves
    lines, guesses = [], []
    for name, part, up in zip(names, parts, after, strict=True):
        fields, guess = _node(d, name, part)
        guesses.append(guess)
        lines.append((name, part, up, fields))
    order = list(range(count))
    if d.chance(0.3):  # declared out of order: the topological order is recomputed
        order = order[::-1]
    shape = d.pick(("constant", "constant", "ramp", "step", "bursty"))
    rps = d.num(0.2, 2.5) * min(guesses)
    out = [f"v=1&seed={int(d.u() * 2**32)}&t={d.pick((5, 10, 20, 30, 60))}"]
    out.append(f"load={shape}&rps={float(f'{rps:.4g}')}")
    out.append(f"arrivals={'deterministic' if d.chance(0.15) else 'poisson'}")
    if shape == "ramp":
        out.append(f"start_fraction={d.num(0, 1)}&ramp_s={d.num(0, 30)}")
    elif shape == "step":
        at = d.num(0, 10)
        out.append(f"base_fraction={d.num(0, 1.5)}&at_s={at}")
        if d.chance(0.7):
            out.append(f"until_s={at + d.num(1, 20)}")
    elif shape == "bursty":
        out.append(f"burst_bias={d.num(0.5, 0.85)}")
    for i in order:
        name, part, up, fields = lines[i]
        out.append(f"node={name}:{part}:{up}")
        out += [f"{name}.{k}={_text(v)}" for k, v in fields]
    slo = {
        "p99_ms": d.num(20, 5000, log=True) if d.chance(0.8) else None,
        "ttft_ms": d.num(200, 8000, log=True),
        "availability": d.pick((0.9, 0.99, 0.999, 0.9999)),
        "soak_utilization": d.num(0.5, 1.0),
        "soak_s": d.num(2, 60),
        "window_s": d.num(0.5, 20),
    }
    out += [f"slo.{k}={_text(v)}" for k, v in slo.items() if d.chance(0.8)]
    return "&".join(out)


def generated(n: int, seed: int = 2024) -> list[str]:
    """``n`` rig fragments from one seed."""
    base = Mulberry32(seed)
    return [generated_one(int(base() * 2**32)) for _ in range(n)]


def python_ticks(fragment: str, cat: Catalog) -> str:
    """The tick file the Python engine writes for a rig."""
    rig = parse(fragment)
    spec = spec_of(rig, cat)
    result, _ = run(spec, rig.seed)
    return "".join(line + "\n" for line in tick_lines(result, rig.seed, "csv"))


def sha256(text: str) -> str:
    """Hex SHA-256 of a tick file's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def node_jobs(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Run a batch through the JavaScript engine in Node."""
    assert NODE is not None
    proc = subprocess.run(
        [NODE, str(RUNNER)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: list[dict[str, Any]] = json.loads(proc.stdout)
    return out
