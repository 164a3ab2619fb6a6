"""The smallest catalog that sweeps for real: a few seconds, so fault tests can verify pages."""

from __future__ import annotations

import shutil
from pathlib import Path

from backpressure.catalog.loader import DEFAULT_ROOT

GPUS = ("rtx-4090", "rtx-3060-12gb")
MODELS = ("llama-3.1-8b", "qwen3-30b-a3b")
SETTINGS = """\
contexts: [2048, 8192]
sweep_quants: [q4_k_m, bf16]
measure_requests: 300
probe_requests: 100
max_users: 64
"""


def make_tiny_catalog(dest: Path) -> Path:
    """Two GPUs, two models, two quants, two contexts; no rigs; returns the catalog root."""
    root = dest / "catalog"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    for folder, keep in (("gpus", GPUS), ("rigs", ()), ("models", MODELS)):
        for path in (root / folder).glob("*.yaml"):
            if path.stem not in keep:
                path.unlink()
    (root / "settings.yaml").write_text(SETTINGS)
    return root
