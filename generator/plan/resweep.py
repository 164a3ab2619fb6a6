"""Configs the sweep does not hold, computed the way the sweep computes them.

The planner reads breaking rates from a sweep output. They hold only for the
sweep's request profile and failure rules, contexts and quants: for another
prompt or output length or TTFT budget, a context or a quant the sweep did not
cover, or a model the sweep output lacks, the configs are evaluated here by
the sweep's own code (:func:`backpressure.generator.sweep.combos.enumerate_combos`,
:func:`backpressure.generator.sweep.run.compute`, which costs each config and
searches its breaking rate through ``build_server`` and ``simulate``).

The planner's settings enter as a copy of the catalog whose
:class:`~backpressure.catalog.schema.Settings` carry them, validated by the
schema: :class:`~backpressure.generator.sweep.rig.LoadSettings` derives the p99
SLO from them exactly as it does for the sweep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from backpressure.catalog.loader import Catalog
from backpressure.catalog.schema import Settings
from backpressure.generator import text
from backpressure.generator.plan.frame import concurrency_frame, results_frame_from_csv
from backpressure.generator.records import context_label
from backpressure.generator.results_io import parse_curves, results_csv
from backpressure.generator.sweep.combos import Combo, enumerate_combos
from backpressure.generator.sweep.run import Progress, compute

# Rows computed for a plan are not published: their fingerprint names this, not
# the inputs a verifier would recompute.
UNPUBLISHED = "plan"


@dataclass(frozen=True, slots=True)
class Profile:
    """The request profile and TTFT budget the breaking rates are found for."""

    prompt_tokens: int
    output_tokens: int
    ttft_budget_ms: float

    def describe(self) -> str:
        """``1,024 prompt + 128 output tokens, TTFT p99 within 1.5 s``."""
        return (
            f"{self.prompt_tokens:,} prompt + {self.output_tokens:,} output tokens, "
            f"TTFT p99 within {text.seconds(self.ttft_budget_ms / 1000)}"
        )


def sweep_profile(cat: Catalog) -> Profile:
    """The profile of the catalog's settings (what the sweep ran)."""
    s = cat.settings
    return Profile(s.prompt_tokens, s.output_tokens, s.ttft_budget_ms)


def planning_catalog(
    cat: Catalog, profile: Profile, contexts: Sequence[int], quants: Sequence[str]
) -> Catalog:
    """The catalog with the planner's profile, contexts and quants as its settings.

    Only fields whose values change are replaced, each with the value the schema
    validates: the others keep their very objects, because a simulation's arrival
    seed hashes the settings' text (``1500`` and ``1500.0`` seed differently).
    Raises pydantic's ``ValidationError`` for values the schema refuses.
    """
    asked = {
        "prompt_tokens": profile.prompt_tokens,
        "output_tokens": profile.output_tokens,
        "ttft_budget_ms": profile.ttft_budget_ms,
        "contexts": tuple(contexts),
        "sweep_quants": tuple(quants),
    }
    changes = {k: v for k, v in asked.items() if getattr(cat.settings, k) != v}
    checked = Settings.model_validate({**cat.settings.model_dump(), **changes})
    settings = cat.settings.model_copy(update={k: getattr(checked, k) for k in changes})
    return dataclasses.replace(cat, settings=settings)


def candidates(cat: Catalog, model: str | None, device: str | None) -> list[Combo]:
    """The combos of ``model`` on ``device`` (None: any) the catalog's settings give, by id."""
    return [
        c
        for c in enumerate_combos(cat)
        if (model is None or c.model == model) and (device is None or c.device == device)
    ]


def reasons(
    cat: Catalog, profile: Profile, contexts: Sequence[int], quants: Sequence[str]
) -> list[str]:
    """Why the sweep's rates do not apply to a plan (empty: they do).

    The sweep output may still lack some of the configs: that is for the
    caller to see, and those are computed under the sweep's own settings.
    """
    out = []
    base = sweep_profile(cat)
    if profile != base:
        out.append(f"the request profile differs from the sweep's ({base.describe()})")
    other_contexts = [c for c in contexts if c not in cat.settings.contexts]
    if other_contexts:
        swept = ", ".join(context_label(c) for c in cat.settings.contexts)
        asked = ", ".join(f"{c:,}" for c in other_contexts)
        out.append(f"the sweep covers contexts {swept}, not {asked} tokens")
    other = sorted(set(quants) - set(cat.settings.sweep_quants))
    if other:
        out.append(f"the sweep does not cover quant {', '.join(other)}")
    return out


def evaluate(
    base: Catalog,
    planning: Catalog,
    combos: Sequence[Combo],
    jobs: int,
    progress: Progress | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Results and concurrency frames of ``combos`` under ``planning``'s settings.

    ``base`` is the catalog as loaded, ``planning`` its :func:`planning_catalog`.
    Worker processes load the catalog from ``base.root`` afresh and so see its
    own settings: ``jobs > 1`` is used only when the planning settings differ
    from them in contexts and quants alone, which every combo names itself.
    """
    skip = {"contexts", "sweep_quants"}
    same = all(
        getattr(base.settings, f) == getattr(planning.settings, f)
        for f in type(base.settings).model_fields
        if f not in skip
    )
    todo = [(c, UNPUBLISHED) for c in combos]
    done = compute(planning, todo, jobs if same else 1, progress, base.root)
    header = results_csv([])
    results = results_frame_from_csv(header + "".join(d.row_line for d in done))
    curves = concurrency_frame(parse_curves(d.curves_line) for d in done)
    return results, curves
