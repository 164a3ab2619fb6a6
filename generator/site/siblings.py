"""A config page's siblings: its other contexts and quants on the same device, and other devices.

Each link goes to the sibling's own page, or to its row on the GPU x model page
when it has none (generator/site/links.py). What a page shows of its siblings
is their ids and whether they fit, nothing else, so :meth:`Siblings.key`
(joined to the page's content key) changes only when one of those does: an
edit that moves another config's numbers does not re-render this page.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backpressure.generator.keys import json_digest
from backpressure.generator.records import ResultRow, context_label
from backpressure.generator.site.links import anchor, pair_dir

if TYPE_CHECKING:
    from backpressure.catalog.loader import Catalog

OTHER_DEVICES = 5  # same quant and context elsewhere: the nearest in memory size, fitting


@dataclass(frozen=True, slots=True)
class Published:
    """What siblings need of a config, read back from its line of a published model JSON."""

    config_id: str
    permalink: str
    gpu: str
    model: str
    quant: str
    context: int
    kv_dtype: str
    fits: bool


Ref = ResultRow | Published  # a config as the sweep gives it, or as the site published it


@dataclass(frozen=True, slots=True)
class Link:
    """One sibling link: its label, its URL relative to the page, whether it is the page itself."""

    label: str
    url: str
    current: bool = False


def relative(page_dir: str, target: str) -> str:
    """``target`` (site-relative, maybe with ``#anchor``) as a link from the page ``page_dir``."""
    path, _, frag = target.partition("#")
    rel = posixpath.relpath(path or ".", page_dir.rstrip("/") or ".") + "/"
    rel = "./" if rel == "./" else rel.removeprefix("./")
    return rel + (f"#{frag}" if frag else "")


def _url(r: Ref) -> str:
    if r.fits:  # links.has_page
        return r.permalink
    return f"{pair_dir(r.gpu, r.model)}#{anchor(r.quant, r.context, r.kv_dtype)}"


class Siblings:
    """Every config's siblings, from one pass over the rows."""

    def __init__(self, rows: Iterable[Ref], memory: Callable[[str], int]) -> None:
        self.memory = memory
        self.pair: dict[tuple[str, str], list[Ref]] = {}
        self.shape: dict[tuple[str, str, int, str], list[Ref]] = {}
        for r in rows:
            self.pair.setdefault((r.gpu, r.model), []).append(r)
            self.shape.setdefault((r.model, r.quant, r.context, r.kv_dtype), []).append(r)

    def _choose(self, row: Ref) -> tuple[list[Ref], list[Ref], list[Ref]]:
        same = self.pair.get((row.gpu, row.model), [])
        contexts = sorted(
            (r for r in same if (r.quant, r.kv_dtype) == (row.quant, row.kv_dtype)),
            key=lambda r: r.context,
        )
        quants = sorted(
            (r for r in same if (r.context, r.kv_dtype) == (row.context, row.kv_dtype)),
            key=lambda r: r.quant,
        )
        mine = math.log2(max(self.memory(row.gpu), 1))
        others = [
            r
            for r in self.shape.get((row.model, row.quant, row.context, row.kv_dtype), [])
            if r.gpu != row.gpu and r.fits
        ]
        near = sorted(
            others, key=lambda r: (abs(math.log2(max(self.memory(r.gpu), 1)) - mine), r.gpu)
        )[:OTHER_DEVICES]
        return contexts, quants, sorted(near, key=lambda r: (self.memory(r.gpu), r.gpu))

    def of(self, row: Ref, device_name: Callable[[str], str]) -> dict[str, Any]:
        """The sibling links of ``row``'s page."""
        contexts, quants, devices = self._choose(row)
        here = row.permalink

        def link(r: Ref, label: str) -> Link:
            return Link(label, relative(here, _url(r)), r.config_id == row.config_id)

        return {
            "contexts": [link(r, context_label(r.context)) for r in contexts],
            "quants": [link(r, r.quant) for r in quants],
            "devices": [link(r, device_name(r.gpu)) for r in devices],
            "pair_url": relative(here, pair_dir(row.gpu, row.model)),
            "model_url": relative(here, f"model/{row.model}/"),
        }

    def key(self, row: Ref, device_name: Callable[[str], str]) -> str:
        """What the sibling links depend on: each sibling's id, whether it fits, device names."""
        contexts, quants, devices = self._choose(row)
        return json_digest(
            [
                [[r.config_id, r.fits] for r in contexts],
                [[r.config_id, r.fits] for r in quants],
                [[r.config_id, device_name(r.gpu)] for r in devices],
            ]
        )


def catalog_memory(cat: Catalog) -> Callable[[str], int]:
    """A device's memory in bytes, all its GPUs (0 for a device the catalog has not)."""

    def memory(device: str) -> int:
        rig = cat.rigs.get(device)
        gpu = cat.gpus.get(rig.gpu if rig else device)
        return 0 if gpu is None else gpu.memory_bytes * (rig.count if rig else 1)

    return memory
