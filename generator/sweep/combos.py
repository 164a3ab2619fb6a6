"""The configs the catalog allows: every device x model x swept quant x context."""

from __future__ import annotations

from dataclasses import dataclass

from backpressure.catalog.loader import Catalog
from backpressure.catalog.support import refusal
from backpressure.generator import resolve
from backpressure.generator.records import config_id


@dataclass(frozen=True, slots=True)
class Combo:
    """One config to sweep, by catalog ids."""

    device: str
    model: str
    quant: str
    runtime: str
    context: int
    kv_dtype: str

    @property
    def id(self) -> str:
        """Stable config id."""
        return config_id(self.device, self.model, self.quant, self.context, self.kv_dtype)


def enumerate_combos(cat: Catalog) -> list[Combo]:
    """Every device x model x swept quant x context the runtimes allow, sorted by id.

    The runtime is the quant's most preferred one that serves the device's memory
    kind and the quant's format on the device's generation (catalog/support.yaml);
    a quant no runtime serves there, or a context above the model's maximum, is skipped.
    """
    kv = cat.settings.default_kv_dtype
    combos: list[Combo] = []
    for device_id in cat.devices():
        kind = resolve.device_for(cat, device_id).memory_kind
        generation = resolve.gpu_entry(cat, device_id).generation
        for quant_id in cat.settings.sweep_quants:
            quant = cat.quants[quant_id]
            runtime = resolve.default_runtime(cat, quant, kind, generation)
            if kind not in cat.runtimes[runtime].memory_kinds:
                continue
            if refusal(cat.support, quant_id, quant.format, generation, runtime) is not None:
                continue
            if runtime not in cat.kv_dtypes[kv].runtimes:
                continue
            for model_id, arch in cat.archs.items():
                combos.extend(
                    Combo(device_id, model_id, quant_id, runtime, ctx, kv)
                    for ctx in cat.settings.contexts
                    if ctx <= arch.max_context
                )
    return sorted(combos, key=lambda c: c.id)
