"""``backpressure verify``: recompute published configs and compare what a reader sees.

For each config the row and curves are recomputed from the catalog, then the
files a reader sees are made again with the site's own code and compared:

- ``api/configs/<id>.json``, byte for byte, and field by field with types
  (``85`` is not ``85.0``, ``true`` is not ``1``, a key given twice is tampering);
- the config page: its body (every number, the worked arithmetic, the chart
  data and static charts, the nearest fits) must appear in it exactly, and its
  title and description must be the recomputed ones;
- its badge, byte for byte;
- its line of ``api/configs.json``;
- its cells on the GPU hub, the model hub and (for the headline configs) the home page.

A site directory is verified whole, or on a seeded sample (``--sample N``).
Exit 1 for any mismatch, 2 for a file that cannot be read.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.generator.ci import strict_json
from backpressure.generator.ci.published import (
    Finding,
    VerifyError,
    compare_fields,
    read_json,
)
from backpressure.generator.ci.recheck import Checker
from backpressure.generator.keys import InputKeys
from backpressure.generator.records import SEP, ResultRow
from backpressure.generator.results_io import row_json
from backpressure.generator.sweep.combos import enumerate_combos
from backpressure.generator.sweep.evaluate import evaluate_many

PERMALINK = re.compile(r"gpu/([^/]+)/([^/]+)/([^/]+)/([^/]+)/(?:kv-([^/]+)/)?$")
__all__ = ["Checker", "Finding", "Outcome", "VerifyError", "read_json"]


@dataclass
class Outcome:
    """What verifying some configs found."""

    checked: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)  # JSON fields

    @property
    def matches(self) -> bool:
        """Whether nothing differs."""
        return not self.findings


# -- targets -------------------------------------------------------------------


def _id_from_permalink(path: str) -> str | None:
    trimmed = path.split("#")[0].split("?")[0].rstrip("/") + "/"
    m = PERMALINK.search(trimmed.removesuffix("index.html/"))
    if not m:
        return None
    device, model, quant, ctx, kv = m.groups()
    base = SEP.join((device, model, quant, ctx))
    return base if not kv else f"{base}{SEP}kv-{kv}"


def config_id_of(target: str) -> str | None:
    """The config id an id, permalink or URL names, or None."""
    if SEP in target and "/" not in target:
        return target
    return _id_from_permalink(target)


# -- whole runs -------------------------------------------------------------


def verify_configs(checker: Checker, cids: list[str]) -> Outcome:
    """Recompute ``cids`` and compare every file of each (nearest fits from the site's rows)."""
    outcome = Outcome()
    fresh = dict(zip(cids, checker.recompute(cids), strict=True))
    models = {checker.combo(c).model for c in cids}
    same_model: dict[str, list[ResultRow]] = {m: [] for m in models}
    for cid, combo in checker.combos.items():
        if combo.model in models:
            row = fresh[cid][0] if cid in fresh else checker.published_row(cid)
            if row is not None:
                same_model[combo.model].append(row)
    for cid in cids:
        row, curves = fresh[cid]
        outcome.checked.append(cid)
        outcome.findings += checker.check(row, curves, same_model[row.model])
    return outcome


def verify_site(checker: Checker, sample: int | None, seed: int) -> Outcome:
    """Every config of the catalog (or a seeded sample) against the site, plus the index's ids."""
    index = checker.index_lines()
    wanted = sorted(checker.combos)
    missing = sorted(set(wanted) - set(index))
    extra = sorted(set(index) - set(wanted))
    cids = (
        wanted
        if sample is None or sample >= len(wanted)
        else sorted(random.Random(seed).sample(wanted, sample))
    )
    outcome = verify_configs(checker, [c for c in cids if c in index])
    if missing:
        outcome.findings.append(
            Finding("api/configs.json", f"{len(missing)} config(s) missing, e.g. {missing[0]}")
        )
    if extra:
        outcome.findings.append(
            Finding(
                "api/configs.json", f"{len(extra)} config(s) the catalog has not, e.g. {extra[0]}"
            )
        )
    return outcome


def verify_json(cat: Catalog, published: Any, cid: str) -> Outcome:
    """A published config JSON on its own: every field, with its type, recomputed."""
    keys = InputKeys(cat)
    combo = next((c for c in enumerate_combos(cat) if c.id == cid), None)
    if combo is None:
        raise VerifyError(f"config {cid!r} is not in the catalog's sweep")
    row, _ = evaluate_many(cat, [(combo, keys.fingerprint_key(combo))])[0]
    outcome = Outcome(checked=[cid])
    outcome.differences = compare_fields(published, row_json(row))
    outcome.findings = [Finding(f"{cid}.json", f"field {k}") for k, _, _ in outcome.differences]
    return outcome


def render(outcome: Outcome, sampled: bool = False) -> str:
    """Human report: one line on a match; per file what differs on a mismatch."""
    n = len(outcome.checked)
    what = (
        "page, badge, JSON, index line and hub cells" if not outcome.differences else "every field"
    )
    if outcome.matches:
        if n == 1:
            return f"verified: {outcome.checked[0]} matches the catalog ({what})"
        scope = "a sample of" if sampled else "all"
        return f"verified: {scope} {n:,} configs match the catalog ({what} of each)"
    if outcome.differences:
        lines = [
            f"MISMATCH: {outcome.checked[0]}: {len(outcome.differences)} field(s) differ",
            f"  {'field':<24} {'published':>24} {'recomputed':>24}",
        ]
        lines += [f"  {k:<24} {_cut(p):>24} {_cut(f):>24}" for k, p, f in outcome.differences]
        return "\n".join(lines)
    head = f"MISMATCH: {len(outcome.findings)} difference(s) in {n:,} config(s) checked"
    return "\n".join([head, *(f"  {f.file}: {f.what}" for f in outcome.findings[:50])])


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else strict_json.dumps(value)
    return text if len(text) <= 24 else text[:21] + "..."


# -- rig builder links ---------------------------------------------------------


def is_rig_target(target: str) -> bool:
    """Whether ``target`` is a rig builder link (or just its fragment): ``v=`` after a ``#``."""
    _, _, frag = target.partition("#")
    return frag.startswith("v=") or target.startswith("v=")


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
