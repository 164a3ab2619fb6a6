"""The rig builder page: what it says about itself (its weight) and what it ships.

The page is a hub page built by mkdocs (``templates/pages/rig.md.j2``); the
browser code is ``web/rig/`` (copied to ``assets/rig/``), the catalog data
:mod:`backpressure.generator.rig.data`'s files.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from backpressure.generator.rig.build import LIMITS
from backpressure.generator.rig.data import DATA_DIR

# What the first run may fetch of the builder's own files (its scripts, the
# index and the default device's data, uncompressed): 250 kB, under a third of
# the Vega scripts a config page loads for its charts (822 kB), and about one
# second at 2 Mbit/s before any compression a host applies (gzip: about 3x on these
# files). tests/generator/rig/test_page.py holds the build to it.
FIRST_LOAD_BUDGET = 250_000


def script_files(web: Path) -> list[Path]:
    """The builder's scripts (every module the page can load)."""
    return sorted(p for p in web.rglob("*.js") if p.is_file())


def weight(files: dict[str, str], web: Path, default_device: str | None) -> dict[str, int]:
    """Byte counts of what the page ships, uncompressed."""
    sizes = {rel: len(text.encode("utf-8")) for rel, text in files.items()}
    devices = [n for rel, n in sizes.items() if rel.startswith(f"{DATA_DIR}/gpu/")]
    scripts = sum(p.stat().st_size for p in script_files(web))
    index = sizes.get(f"{DATA_DIR}/index.json", 0)
    first_device = sizes.get(f"{DATA_DIR}/gpu/{default_device}.json", max(devices, default=0))
    return {
        "scripts": scripts,
        "index": index,
        "default_device": first_device,
        "first_load": scripts + index + first_device,
        "device_median": int(statistics.median(devices)) if devices else 0,
        "device_max": max(devices, default=0),
        "devices": len(devices),
        "data_total": sum(sizes.values()),
        "budget": FIRST_LOAD_BUDGET,
    }


def page_context(files: dict[str, str], web: Path, default_config: str | None) -> dict[str, Any]:
    """Everything ``pages/rig.md.j2`` renders."""
    device = default_config.split("--")[0] if default_config else None
    return {"weight": weight(files, web, device), "limits": LIMITS, "data_dir": "data/"}
