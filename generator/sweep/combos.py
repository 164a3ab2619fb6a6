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


def released_quant(cat: Catalog, model_id: str) -> str | None:
    """The catalog quant a model's weights are released in, from its config.json.

    ``quantization_config.quant_method`` names it where the checkpoint is
    quantized (gpt-oss: ``mxfp4``; DeepSeek V3: ``fp8``); None for BF16 releases
    and for methods the catalog has no quant of.
    """
    qc = cat.models[model_id].config.get("quantization_config")
    method = qc.get("quant_method") if isinstance(qc, dict) else None
    return method if isinstance(method, str) and method in cat.quants else None


def swept_quants(cat: Catalog) -> dict[str, frozenset[str] | None]:
    """Quant id -> the models swept in it (None: every model), in the order swept.

    The settings' ``sweep_quants`` for every model, and each model's released
    format for that model alone (gpt-oss in MXFP4), so a model is shown in the
    weights its makers ship.
    """
    out: dict[str, frozenset[str] | None] = dict.fromkeys(cat.settings.sweep_quants)
    extra: dict[str, set[str]] = {}
    for model_id in cat.archs:
        quant = released_quant(cat, model_id)
        if quant is not None and quant not in out:
            extra.setdefault(quant, set()).add(model_id)
    out.update({q: frozenset(models) for q, models in sorted(extra.items())})
    return out


def enumerate_combos(cat: Catalog) -> list[Combo]:
    """Every device x model x swept quant x context the runtimes allow, sorted by id.

    The quants are the settings' ``sweep_quants`` and each model's released
    format (:func:`swept_quants`). The runtime is the quant's most preferred one
    that serves the device's memory kind and the quant's format on the device's
    generation (catalog/support.yaml); a quant no runtime serves there, or a
    context above the model's maximum, is skipped.
    """
    kv = cat.settings.default_kv_dtype
    combos: list[Combo] = []
    quants = swept_quants(cat)
    for device_id in cat.devices():
        kind = resolve.device_for(cat, device_id).memory_kind
        generation = resolve.gpu_entry(cat, device_id).generation
        for quant_id, only in quants.items():
            quant = cat.quants[quant_id]
            runtime = resolve.default_runtime(cat, quant, kind, generation)
            if kind not in cat.runtimes[runtime].memory_kinds:
                continue
            if refusal(cat.support, quant_id, quant.format, generation, runtime) is not None:
                continue
            if runtime not in cat.kv_dtypes[kv].runtimes:
                continue
            for model_id, arch in cat.archs.items():
                if only is not None and model_id not in only:
                    continue
                combos.extend(
                    Combo(device_id, model_id, quant_id, runtime, ctx, kv)
                    for ctx in cat.settings.contexts
                    if ctx <= arch.max_context
                )
    return sorted(combos, key=lambda c: c.id)
