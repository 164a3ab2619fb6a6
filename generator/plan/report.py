"""A planner answer as ``plan --json`` prints it, and as a table for people.

The JSON is canonical (sorted keys when dumped, floats to six significant
digits, no paths or times), so the same question over the same sweep gives the
same bytes.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from backpressure.catalog.loader import Catalog
from backpressure.generator import text
from backpressure.generator.plan.economics import HOURS_PER_YEAR, Basis
from backpressure.generator.plan.planner import PLAN_COLUMNS
from backpressure.generator.plan.query import Answer
from backpressure.generator.plan.rank import RANKING_COLUMNS, plain, records

BASIS_TEXT: dict[Basis, str] = {
    "auto": "rental where the catalog lists a price, else owned",
    "rental": "rental only",
    "owned": "owned only",
}
DEVICE_COLUMNS = (*RANKING_COLUMNS, *(c for c in PLAN_COLUMNS if c not in RANKING_COLUMNS))


def cost_method(cat: Catalog, basis: Basis) -> dict[str, Any]:
    """The assumptions every cost rests on, as the JSON states them."""
    s = cat.settings
    return {
        "basis": basis,
        "basis_text": BASIS_TEXT[basis],
        "rental": "default quote's USD per GPU-hour x GPUs",
        "owned": "purchase / (amortisation_years x hours_per_year) + rated power x electricity",
        "amortisation_years": s.amortisation_years,
        "hours_per_year": HOURS_PER_YEAR,
        "electricity": s.electricity.model_dump(mode="json"),
    }


def _rates_note(a: Answer) -> dict[str, Any]:
    return {
        "source": "computed" if a.computed else "sweep",
        "why": list(a.computed),
        "configs_computed": a.simulated,
    }


def answer_json(cat: Catalog, a: Answer) -> dict[str, Any]:
    """The ``--json`` object of a plan or device question."""
    q = a.question
    p = q.profile
    out: dict[str, Any] = {
        "mode": "plan" if q.is_plan else "device",
        "model": q.model,
        "device": q.device,
        "rps": plain(q.rps),
        "contexts": list(q.contexts),
        "quants": list(q.quants),
        "tpot_ms": plain(q.tpot_ms),
        "max_usd_per_hour": plain(q.max_usd_per_hour),
        "profile": {
            "prompt_tokens": p.prompt_tokens,
            "output_tokens": p.output_tokens,
            "ttft_p99_ms": plain(p.ttft_budget_ms),
        },
        "rates": _rates_note(a),
        "cost_method": cost_method(cat, q.basis),
    }
    if a.plan is not None:
        out["context"] = q.contexts[0]
        out["met"] = not a.plan.plans.empty
        out["plans"] = records(a.plan.plans)
        out["closest"] = records(a.plan.closest)
        out["excluded"] = dict(sorted(a.plan.excluded.items()))
    if a.best is not None:
        cols = [c for c in DEVICE_COLUMNS if c in a.best]
        out["best"] = records(a.best, cols)
    return out


def _money(x: Any) -> str:
    v = plain(x)
    if v is None:
        return "—"
    return f"{v:,.2f}" if v >= 1 else f"{v:.3g}"


def _band(row: pd.Series) -> str:
    return (
        f"{text.rps(plain(row['breaking_rps']))} "
        f"({text.rps(plain(row['breaking_rps_low']))}–{text.rps(plain(row['breaking_rps_high']))})"
    )


def _price(row: pd.Series) -> str:
    if plain(row["usd_per_hour"]) is None:
        return str(row["unpriced_reason"])
    return f"{row['price_basis']}, {row['price_quote']}, {row['price_as_of']}"


def _ms(x: Any) -> str:
    v = plain(x)
    return "—" if v is None else f"{v:,.1f}"


def _plan_row(i: int, row: pd.Series) -> str:
    return (
        f"  {i:>2}  {row['device']:<24} {row['quant']:<9} {int(row['replicas']):>8,}  "
        f"{_band(row):<22} {row['breaking_rule']:<10} {_ms(row['tpot_ms']):>7} "
        f"{_money(row['usd_per_hour_total']):>10} "
        f"{_money(row['usd_per_million_output_tokens']):>10}  {_price(row)}"
    )


PLAN_HEAD = (
    f"  {'#':>2}  {'device':<24} {'quant':<9} {'replicas':>8}  {'breaks at (band)':<22} "
    f"{'breaks on':<10} {'TPOT ms':>7} {'$/hour':>10} {'$/M tok':>10}  price"
)


def _header(cat: Catalog, a: Answer) -> list[str]:
    q = a.question
    source = (
        f"computed for this question ({text.plural(a.simulated, 'config')} simulated "
        f"as the sweep does): " + "; ".join(a.computed)
        if a.computed
        else "read from the sweep"
    )
    s = cat.settings
    return [
        f"  profile   {q.profile.describe()}",
        f"  rates     {source}",
        f"  cost      {BASIS_TEXT[q.basis]}; owned = purchase over {s.amortisation_years:g} "
        f"years + rated power at ${s.electricity.usd_per_kwh:g}/kWh "
        f"({s.electricity.region}, {s.electricity.as_of.isoformat()})",
    ]


def plan_lines(cat: Catalog, a: Answer, top: int = 0) -> list[str]:
    """The human table of a plan question: the ``top`` cheapest plans (0: all)."""
    assert a.plan is not None
    q, p = a.question, a.plan
    ctx = q.contexts[0]
    limits = [f"TPOT ≤ {q.tpot_ms:g} ms" if q.tpot_ms else "", ""]
    if q.max_usd_per_hour:
        limits[1] = f"at most ${q.max_usd_per_hour:g}/h"
    extra = ", ".join(x for x in limits if x)
    title = f"{q.model} at {text.rps(q.rps)} requests/s, {ctx:,}-token context"
    lines = [title + (f", {extra}" if extra else ""), *_header(cat, a), ""]
    if p.plans.empty:
        lines.append("No catalog device, rig or quant meets this target. The closest:")
        for _, row in p.closest.iterrows():
            lines.append(
                f"  {row['device']} {row['quant']} {row['context']:,}: "
                f"{_band(row)} requests/s per replica; {row['why_not']}"
            )
        if p.closest.empty:
            lines.append("  (none: no config of this model serves on catalog hardware)")
    else:
        lines.append(PLAN_HEAD)
        shown = p.plans if top <= 0 else p.plans.head(top)
        lines += [_plan_row(i, row) for i, (_, row) in enumerate(shown.iterrows(), start=1)]
        if len(shown) < len(p.plans):
            lines.append(f"  ... and {len(p.plans) - len(shown):,} more (--top 0 lists all)")
    if p.excluded:
        missed = ", ".join(f"{n:,} {why}" for why, n in sorted(p.excluded.items()))
        lines += ["", f"Not listed: {missed}."]
    lines.append("Replicas are counted from the low end of each band.")
    return lines


def device_lines(cat: Catalog, a: Answer) -> list[str]:
    """The human table of a device question."""
    assert a.best is not None
    q, best = a.question, a.best
    lines = [f"{q.device}: what it serves best, per model and context", *_header(cat, a), ""]
    if best.empty:
        lines.append("  nothing in the catalog serves on this device at these settings")
        return lines
    head = f"  {'model':<28} {'context':>8} {'quant':<9} {'req/s (band)':<22} {'breaks on':<12}"
    head += f" {'tok/s 1 user':>12} {'$/M at break':>12}"
    if q.rps is not None:
        head += f" {'replicas':>9} {'$/hour':>10}"
    lines.append(head)
    for _, row in best.iterrows():
        line = (
            f"  {row['model']:<28} {row['context']:>8,} {row['quant']:<9} {_band(row):<22} "
            f"{row['breaking_rule']:<12} {plain(row['single_stream_tokens_per_s']):>12,.1f} "
            f"{_money(row['usd_per_mtok_breaking']):>12}"
        )
        if q.rps is not None:
            n = row["replicas"]
            count = "—" if pd.isna(n) else f"{int(n):,}"
            line += f" {count:>9} {_money(row['usd_per_hour_total']):>10}"
        lines.append(line)
    return lines
