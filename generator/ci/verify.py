"""``backpressure verify``: recompute a published config and compare every number."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.keys import InputKeys
from backpressure.generator.records import SEP
from backpressure.generator.results_io import row_json
from backpressure.generator.sweep.combos import Combo, enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate

PERMALINK = re.compile(r"gpu/([^/]+)/([^/]+)/([^/]+)/([^/]+)/(?:kv-([^/]+)/)?$")


class VerifyError(ValueError):
    """A target that names no config, or a file that is not a published config."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The comparison: matching or not, and every field that differs."""

    config_id: str
    matches: bool
    differences: tuple[tuple[str, Any, Any], ...]


def _id_from_permalink(path: str) -> str | None:
    trimmed = path.split("#")[0].split("?")[0].rstrip("/") + "/"
    m = PERMALINK.search(trimmed.removesuffix("index.html/"))
    if not m:
        return None
    device, model, quant, ctx, kv = m.groups()
    base = SEP.join((device, model, quant, ctx))
    return base if not kv else f"{base}{SEP}kv-{kv}"


def resolve_target(target: str, site_dir: Path) -> tuple[str, dict[str, Any]]:
    """Config id and the published JSON for an id, permalink, URL or JSON file."""
    path = Path(target)
    if target.endswith(".json") and path.is_file():
        try:
            published = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise VerifyError(f"{target}: not a readable JSON file: {exc}") from exc
        if not isinstance(published, dict) or not isinstance(published.get("config_id"), str):
            raise VerifyError(f"{target}: not a published config (no config_id)")
        return published["config_id"], published
    cid = target if SEP in target and "/" not in target else _id_from_permalink(target)
    if cid is None:
        raise VerifyError(f"{target!r} is neither a config id, a permalink nor a JSON file")
    api = site_dir / "api" / "configs" / f"{cid}.json"
    if not api.is_file():
        raise VerifyError(f"no published JSON for {cid} under {site_dir}/api/configs/")
    return cid, json.loads(api.read_text(encoding="utf-8"))


def find_combo(cat: Catalog, cid: str) -> Combo:
    """The combo a config id names in this catalog."""
    for combo in enumerate_combos(cat):
        if combo.id == cid:
            return combo
    raise VerifyError(f"config {cid!r} is not in the catalog's sweep")


def verify(cat: Catalog, cid: str, published: dict[str, Any]) -> Outcome:
    """Recompute ``cid`` and compare each published field with the recomputed one."""
    combo = find_combo(cat, cid)
    row, _ = evaluate(cat, combo, InputKeys(cat).fingerprint_key(combo))
    fresh = row_json(row)
    keys = sorted(set(fresh) | set(published))
    diffs = tuple(
        (k, published.get(k, "<missing>"), fresh.get(k, "<missing>"))
        for k in keys
        if published.get(k, "<missing>") != fresh.get(k, "<missing>")
    )
    return Outcome(cid, not diffs, diffs)


def render(outcome: Outcome) -> str:
    """Human report: one line on a match, a field table on a mismatch."""
    if outcome.matches:
        return f"verified: {outcome.config_id} matches the catalog (fingerprint and every field)"
    lines = [
        f"MISMATCH: {outcome.config_id}: {len(outcome.differences)} field(s) differ",
        f"  {'field':<24} {'published':>24} {'recomputed':>24}",
    ]
    for name, pub, fresh in outcome.differences:
        lines.append(f"  {name:<24} {_short(pub):>24} {_short(fresh):>24}")
    return "\n".join(lines)


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 24 else text[:21] + "..."


# -- rig builder links ---------------------------------------------------------


def is_rig_target(target: str) -> bool:
    """Whether ``target`` is a rig builder link (or just its fragment)."""
    path, _, frag = target.partition("#")
    return frag.startswith("v=") or target.startswith("v=") or path.rstrip("/").endswith("/rig")


@dataclass(frozen=True, slots=True)
class RigOutcome:
    """A rig recomputed: its verdict line and each claim of the link, held or not."""

    summary: str
    bottleneck: str
    checks: tuple[tuple[str, str, str, bool], ...]

    @property
    def holds(self) -> bool:
        """Every claim the link makes matches the recomputation."""
        return all(ok for *_, ok in self.checks)


def verify_rig(cat: Catalog, target: str) -> RigOutcome:
    """Recompute a rig builder link and compare its verdict and breaking rate.

    Raises VerifyError (one line) when the link is malformed or names what the
    catalog does not have.
    """
    from backpressure.engine.sim.verdict import fmt_rps
    from backpressure.generator.rig.build import run, run_sweep, spec_of
    from backpressure.generator.rig.doc import Claim, RigError, parse

    try:
        rig = parse(target)
        if rig.breaking is not None and rig.sweep is None:
            raise RigError("breaking: a breaking rate needs the sweep it came from (sweep=...)")
        spec = spec_of(rig, cat)
        _, rep = run(spec, rig.seed)
        swept = run_sweep(spec, rig) if rig.sweep is not None else None
    except RigError as exc:
        raise VerifyError(f"rig link: {exc}") from None
    verdict = Claim(rep.passed, rep.failing_rule, rep.failing_node).text()
    checks = []
    if rig.claim is not None:
        checks.append(("verdict", rig.claim.text(), verdict, rig.claim.text() == verdict))
    if swept is not None and rig.breaking is not None:

        def rate(x: float | None) -> str:
            return "none (every level holds)" if x is None else f"{fmt_rps(x)} rps"

        claimed, fresh = rig.breaking[0], swept.breaking_rps
        checks.append(("breaking rate", rate(claimed), rate(fresh), claimed == fresh))
    summary = (
        f"rig of {len(spec.nodes)} node(s), {fmt_rps(spec.source.rps)} rps for "
        f"{spec.duration_s:g} s, seed {rig.seed}: {verdict}"
    )
    if swept is not None:
        broke = swept.breaking_rps
        summary += f"; sweep breaks at {fmt_rps(broke)} rps" if broke else "; sweep holds"
    return RigOutcome(summary, rep.bottleneck, tuple(checks))


def render_rig(outcome: RigOutcome) -> str:
    """Human report of a recomputed rig: the verdict, each claim, and the bottleneck."""
    lines = [f"recomputed {outcome.summary}", f"  {outcome.bottleneck}"]
    for name, claimed, fresh, ok in outcome.checks:
        lines.append(
            f"  {name}: claimed {claimed}, recomputed {fresh}: {'holds' if ok else 'DIFFERS'}"
        )
    if not outcome.checks:
        lines.append("nothing to check: the link claims no verdict or breaking rate")
    elif outcome.holds:
        lines.append("verified: the link's verdict and breaking rate hold")
    else:
        lines.append("MISMATCH: the link's claims do not hold")
    return "\n".join(lines)
