"""Architectures of checkpoints that calibration rows load but the catalog does not publish.

``benchmarks/data/calibration_archs.yaml`` keeps their config.json keys by
Hugging Face repo, each with its source; they are parsed as a catalog model's
config is (:func:`backpressure.catalog.hf_config.parse_config`). The KV checks
read them for startup logs of such checkpoints, and the serving checks for
measured runs of them: a model the site does not publish still tests the
engine.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml
from backpressure.catalog.hf_config import parse_config
from backpressure.catalog.loader import Catalog
from backpressure.engine.arch import ModelArch
from backpressure.generator.accuracy.rows import DATA

FILE = "calibration_archs.yaml"


@cache
def extra_archs() -> dict[str, ModelArch]:
    """Every calibration-only architecture, by repo.

    The allocator check needs only the layout, so a log of such a model still
    tests the pool. The end-to-end check needs weights too: an entry names a
    catalog quant (:func:`extra_quants`) only where its checkpoint loads
    unquantized, so the weights follow from the keys alone.
    """
    return {repo: parse_config(e["config"]) for repo, e in sorted(_entries().items())}


@cache
def extra_quants() -> dict[str, str]:
    """The catalog quant of each calibration-only checkpoint that names one, by repo."""
    return {repo: e["quant"] for repo, e in sorted(_entries().items()) if "quant" in e}


def extra_config(repo: str) -> dict[str, Any]:
    """The config.json keys kept for a calibration-only checkpoint."""
    config: dict[str, Any] = _entries()[repo]["config"]
    return config


def model_id(repo: str) -> str:
    """The id a calibration-only checkpoint goes by in reports: its repo's name."""
    return repo.rpartition("/")[2]


@cache
def by_id() -> dict[str, ModelArch]:
    """Every calibration-only architecture, by :func:`model_id`."""
    return {model_id(repo): arch for repo, arch in extra_archs().items()}


def arch_of(cat: Catalog, model: str) -> ModelArch:
    """A catalog model's architecture, or a calibration-only checkpoint's by its id."""
    arch = cat.archs.get(model)
    return arch if arch is not None else by_id()[model]


def known(cat: Catalog, model: str) -> bool:
    """Whether :func:`arch_of` has an architecture for ``model``."""
    return model in cat.archs or model in by_id()


@cache
def _entries() -> dict[str, dict[str, Any]]:
    with (DATA / FILE).open(encoding="utf-8") as fh:
        entries: dict[str, dict[str, Any]] = yaml.safe_load(fh)
    return entries
