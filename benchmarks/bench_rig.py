"""How soon the rig builder shows a result: headless chromium and Node (medians).

    python3 benchmarks/bench_rig.py [OUT.txt]      # from the repo root

The issue's target: a first result within one second of pressing Run for a
ten-minute simulated run of a five-node rig. The rig is the builder's default:
load -> app tier -> Postgres, app tier -> queue -> an LLM server (Llama 3.1 8B
Q4_K_M on an RTX 4090) that blocks: five nodes counting the load, 6,000 ticks.

Chromium (Debian's, /usr/bin/chromium) opens the page as the site ships it
(web/rig/ as assets/rig/, the catalog data beside it) from a loopback server,
then Run is pressed REPEATS times; each press records, on the page, the time
from the click to the verdict, bars and bottleneck being in the DOM
(``data-first-result-ms``) and the engine's share of it (``data-engine-ms``).
Node runs the same engine on the same spec. Wall-clock milliseconds on this
machine (shared, two cores): a laptop is usually faster. Timing lives here and
in the browser test's recorded properties, never in an assert.
"""

from __future__ import annotations

import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backpressure.catalog.loader import load_catalog
from backpressure.generator.paths import ROOT, WEB_RIG
from backpressure.generator.rig.data import DATA_DIR, ConfigRef, device_json, index_json
from backpressure.generator.sweep.combos import enumerate_combos

REPEATS = 9
CHROMIUM = "/usr/bin/chromium"
DEVICE = "rtx-4090"
PAGE = """<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="../assets/rig/rig.css"></head><body>
<div id="bp-rig" class="bp-rig" data-data="data/"></div>
<script type="module" src="../assets/rig/app.js"></script></body></html>
"""
NODE_BENCH = """
import * as rig from './assets/rig/rig.js';
import { simulate } from './assets/rig/engine/run.js';
import { readFileSync } from 'node:fs';
const index = JSON.parse(readFileSync('rig/data/index.json', 'utf8'));
const devices = { '%(device)s': JSON.parse(readFileSync('rig/data/gpu/%(device)s.json', 'utf8')) };
const doc = rig.parse(process.argv[2]);
const spec = rig.specOf(doc, index, devices);
const times = [];
for (let i = 0; i < %(repeats)d; i++) {
  const t = performance.now();
  simulate(spec, doc.seed);
  times.push(performance.now() - t);
}
process.stdout.write(JSON.stringify(times));
"""


def harness(out: Path) -> None:
    """The builder's files as the site ships them, with every config of one device."""
    cat = load_catalog()
    refs = [
        ConfigRef(c.id, c.device, c.model, c.quant, c.context, c.kv_dtype, c.runtime)
        for c in enumerate_combos(cat)
        if c.device == DEVICE
    ]
    shutil.copytree(WEB_RIG, out / "assets" / "rig")
    data = out / DATA_DIR
    (data / "gpu").mkdir(parents=True)
    (data / "index.json").write_text(json.dumps(index_json(cat, refs)), encoding="utf-8")
    device = json.dumps(device_json(cat, DEVICE, refs))
    (data / "gpu" / f"{DEVICE}.json").write_text(device, encoding="utf-8")
    (out / "rig" / "index.html").write_text(PAGE, encoding="utf-8")


def in_chromium(site: Path) -> tuple[dict[str, list[float]], str, int]:
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    from tests.browser.serve import CHROMIUM_ARGS, serve

    out: dict[str, list[float]] = {"first_ms": [], "engine_ms": [], "load_ms": []}
    with serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(base + "rig/")
        page.wait_for_selector("#bp-rig[data-state]", timeout=60000)
        # the page runs its rig once on load (fetching the device's data first)
        out["load_ms"].append(float(page.get_attribute("#bp-rig", "data-first-result-ms") or 0))
        fragment = page.evaluate("window.location.hash.slice(1)")
        nodes = page.locator(".bp-rig-health").count()
        for _ in range(REPEATS):
            page.evaluate("delete document.querySelector('#bp-rig').dataset.firstResultMs")
            page.click("#bp-rig-run")
            page.wait_for_selector("#bp-rig[data-first-result-ms]", timeout=60000)
            out["first_ms"].append(float(page.get_attribute("#bp-rig", "data-first-result-ms")))
            out["engine_ms"].append(float(page.get_attribute("#bp-rig", "data-engine-ms")))
        browser.close()
    return out, fragment, nodes


def in_node(site: Path, fragment: str) -> list[float]:
    script = site / "bench.mjs"
    script.write_text(NODE_BENCH % {"device": DEVICE, "repeats": REPEATS}, encoding="utf-8")
    node = shutil.which("node")
    if node is None:
        return []
    proc = subprocess.run(
        [node, str(script), fragment], cwd=site, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    times: list[float] = json.loads(proc.stdout)
    return times


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        harness(site)
        browser, fragment, servers = in_chromium(site)
        node = in_node(site, fragment)
        version = subprocess.run(
            [CHROMIUM, "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        node_version = subprocess.run(
            ["node", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.0f} ms (min {min(xs):.0f}, max {max(xs):.0f})"

    lines = [
        "Rig builder: time to the first result of a 10-minute, 5-node run "
        f"(load + {servers} servers, 6,000 ticks), median of {REPEATS}",
        f"machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, {version}, node {node_version}",
        f"rig: #{fragment}",
        f"chromium, Run -> verdict, bars, bottleneck in the DOM: {med(browser['first_ms'])}",
        f"chromium, engine alone (simulate):                    {med(browser['engine_ms'])}",
        f"chromium, first run on opening (fetches device data): {browser['load_ms'][0]:.0f} ms",
    ]
    if node:
        lines.append(f"node, engine alone (simulate):                        {med(node)}")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
