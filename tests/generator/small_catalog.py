"""A trimmed copy of the bundled catalog, small enough to sweep in a test."""

from __future__ import annotations

import shutil
from pathlib import Path

from backpressure.catalog.loader import DEFAULT_ROOT

GPUS = ("rtx-4090", "h100-sxm", "m4-max-128gb", "rtx-3060-12gb")
RIGS = ("2x-rtx-4090",)
MODELS = ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b")
SETTINGS = """\
contexts: [2048, 8192]
sweep_quants: [q4_k_m, bf16, fp8]
"""


def make_small_catalog(dest: Path) -> Path:
    """Copy the catalog with a few GPUs and models; return its directory."""
    root = dest / "catalog"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    for folder, keep in (("gpus", GPUS), ("rigs", RIGS), ("models", MODELS)):
        for path in (root / folder).glob("*.yaml"):
            if path.stem not in keep:
                path.unlink()
    (root / "settings.yaml").write_text(SETTINGS)
    return root
