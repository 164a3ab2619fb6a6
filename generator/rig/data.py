"""What the rig builder needs of the catalog, as JSON beside its page.

``rig/data/index.json`` holds the parts with their defaults, every field a node,
the load and the rules may set with its bounds (read from the scenario schema,
catalog/scenario.py, so the browser checks what the catalog checks), the
builder's limits and the devices and models on offer. ``rig/data/gpu/<device>.json``
holds, per model and quant, the serving model's step cost and, per context,
the scheduler's limits of every config of that device that fits: what an LLM
node needs to run. The browser fetches a device's file when a node picks it.

Computing a device's numbers means costing each of its configs (a few ms
each), so with a render cache each file is kept under a key of the catalog
entries its configs name (the digests the config pages are keyed by: a row's
fingerprint alone may be stale while the catalog moves under it), the shared
settings and calibration, and this module's code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backpressure.catalog.loader import Catalog
from backpressure.catalog.scenario import PART_KINDS, LoadSource, Slo, load_parts
from backpressure.engine.serving.step import pack
from backpressure.engine.sim.model import TICK_S
from backpressure.generator.keys import Entities, code_digest, digest, entities
from backpressure.generator.records import ResultRow, context_label
from backpressure.generator.rig.build import LIMITS
from backpressure.generator.rig.doc import LOAD_FIELDS, SLO_FIELDS
from backpressure.generator.rig.fields import CONFIG, fields_of, node_fields
from backpressure.generator.simulate import Served, served_for
from backpressure.generator.site.escape import json_text
from pydantic import BaseModel

if TYPE_CHECKING:
    from backpressure.engine.results import CapacityResult
    from backpressure.generator.site.publish.cache import RenderCache

DATA_MODULE = "backpressure.generator.rig.data"
DATA_DIR = "rig/data"
DEFAULT_CONFIG = "rtx-4090--llama-3.1-8b--q4_k_m--8k"


@dataclass(frozen=True, slots=True)
class ConfigRef:
    """A config the builder offers: what names it, and (from its row) whether it fits."""

    config_id: str
    gpu: str
    model: str
    quant: str
    context: int
    kv_dtype: str
    runtime: str
    fits: bool = True
    fingerprint: str = ""

    @classmethod
    def of_row(cls, r: ResultRow) -> ConfigRef:
        """A sweep row's config."""
        return cls(
            r.config_id,
            r.gpu,
            r.model,
            r.quant,
            r.context,
            r.kv_dtype,
            r.runtime,
            r.fits,
            r.fingerprint,
        )


def defaults(model: type[BaseModel], names: Iterable[str]) -> dict[str, Any]:
    """The schema defaults of ``names``."""
    return {n: model.model_fields[n].default for n in names}


def index_json(cat: Catalog, rows: Iterable[ConfigRef]) -> dict[str, Any]:
    """The builder's index: parts, field specs, limits, devices and models on offer."""
    fits = [r for r in rows if r.fits]
    parts = load_parts(cat.root / "parts")
    kinds = {kind: fields_of(model, node_fields(model)) for kind, model in PART_KINDS.items()}
    devices = sorted({r.gpu for r in fits})
    models = sorted({r.model for r in fits})
    ids = {r.config_id for r in fits}
    default = DEFAULT_CONFIG if DEFAULT_CONFIG in ids else min(ids, default=None)
    return {
        "version": 1,
        "tick_s": TICK_S,
        "limits": LIMITS,
        "parts": {
            pid: {
                "kind": p.kind,
                "name": p.name,
                "values": {f: getattr(p, f) for f in node_fields(type(p)) if f != CONFIG},
            }
            for pid, p in parts.items()
        },
        "fields": kinds,
        "load": fields_of(LoadSource, ("shape", "rps", "arrivals", *LOAD_FIELDS)),
        "load_defaults": defaults(LoadSource, ("shape", "arrivals", *LOAD_FIELDS)),
        "slo": fields_of(Slo, SLO_FIELDS),
        "slo_defaults": defaults(Slo, SLO_FIELDS),
        "devices": [[d, _device_name(cat, d)] for d in devices],
        "models": {m: cat.models[m].name if m in cat.models else m for m in models},
        "quants": {q.id: q.name for q in cat.quants.values()},
        "default_config": default,
    }


def _device_name(cat: Catalog, device: str) -> str:
    entry = cat.gpus.get(device) or cat.rigs.get(device)
    return entry.name if entry is not None else device


def config_entry(served: Served) -> list[int] | None:
    """A config's scheduler limits as the browser reads them, or None if it cannot run."""
    if served.cost is None or not served.capacity.fits or served.capacity.slots < 1:
        return None
    s = served.scheduler
    return [
        int(s.policy),
        s.kv_blocks,
        s.block_tokens,
        s.max_seqs,
        s.max_batched_tokens,
        s.ubatch_tokens,
    ]


# vLLM's layer-group kinds as the browser's pool conversion numbers them
POOL_KINDS = {"full": 0, "sliding": 1, "chunked": 2, "state": 3}


def pool_groups(cap: CapacityResult) -> list[list[int]]:
    """A hybrid vLLM pool's layer groups as ``[kind, groups, window]`` rows.

    Empty for a pool of one kind, whose blocks are admitted as they are
    (:func:`~backpressure.engine.serving.spec.pool_blocks`).
    """
    pool = cap.kv_pool
    if pool is None or len(pool.kinds) < 2:
        return []
    return [[POOL_KINDS[kind.split(":")[0]], g, window] for kind, g, window in pool.kinds]


def device_json(cat: Catalog, device: str, rows: Iterable[ConfigRef]) -> dict[str, Any]:
    """Every fitting config of one device: step cost per model and quant, limits per context.

    The numbers are what :func:`backpressure.generator.rig.build.spec_of` resolves
    for the same config id, so the browser and ``backpressure verify`` agree.
    """
    configs: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r.config_id):
        if not r.fits:
            continue
        served = served_for(r.gpu, r.quant, r.context, r.model, kv_dtype=r.kv_dtype, cat=cat)
        limits = config_entry(served)
        if limits is None or served.cost is None:
            continue
        by_quant = configs.setdefault(r.model, {})
        entry = by_quant.setdefault(
            r.quant,
            {
                "runtime": r.runtime,
                "cost": pack(served.cost).tolist(),
                "experts": [
                    served.cost.num_experts,
                    served.cost.experts_per_token,
                    served.cost.expert_pair_below,
                ],
                "pool": pool_groups(served.capacity),
                "contexts": {},
            },
        )
        tail = context_label(r.context) + ("" if r.kv_dtype == "auto" else f"--kv-{r.kv_dtype}")
        entry["contexts"][tail] = limits
    return {"device": device, "configs": configs}


def rig_files(
    cat: Catalog, results: Iterable[ResultRow], cache: RenderCache | None = None
) -> dict[str, str]:
    """Every data file of the builder: site-relative path -> JSON text."""
    rows = [ConfigRef.of_row(r) for r in results]

    def dump(obj: Any) -> str:
        # markup characters as escapes: catalog names here are data, never markup,
        # even for a reader that opens the file as a page
        return json_text(obj) + "\n"

    by_device: dict[str, list[ConfigRef]] = {}
    for r in rows:
        if r.fits:
            by_device.setdefault(r.gpu, []).append(r)
    out = {f"{DATA_DIR}/index.json": dump(index_json(cat, rows))}
    version = code_digest(DATA_MODULE) if cache is not None else ""
    ent = entities(cat) if cache is not None else None
    for device, mine in sorted(by_device.items()):
        doc = _cached(cat, device, mine, cache, version, ent)
        out[f"{DATA_DIR}/gpu/{device}.json"] = dump(doc)
    return out


def _cached(
    cat: Catalog,
    device: str,
    rows: list[ConfigRef],
    cache: RenderCache | None,
    version: str,
    ent: Entities | None,
) -> Mapping[str, Any]:
    if cache is None or ent is None:
        return device_json(cat, device, rows)
    named = (ent.of(r.gpu, r.model, r.quant, r.runtime, r.kv_dtype) for r in rows)
    key = digest(
        version,
        ent.shared,
        *sorted(f"{r.config_id}={r.fingerprint}={e}" for r, e in zip(rows, named, strict=True)),
    )
    doc = cache.doc("rigdata", key)
    if doc is None:
        doc = device_json(cat, device, rows)
        cache.put_doc("rigdata", key, doc)
    return dict(doc)
