"""``backpressure verify``: recompute published configs and compare what a reader sees.

For each config the row and curves are recomputed from the catalog, then the
files a reader sees are made again with the site's own code and compared:

- its line of ``api/models/<model>.json``, byte for byte, and field by field
  with types where it differs (``85`` is not ``85.0``, ``true`` is not ``1``, a
  key given twice is tampering); the file must be strict JSON in the site's frame;
- its anchored row on the GPU x model page ``gpu/<gpu>/<model>/``, exactly;
- if it fits, its page: the body (every number, the worked arithmetic, the
  chart data and static charts, the sibling links) must appear in it exactly,
  and its title and description must be the recomputed ones; and its badge,
  byte for byte. A config that does not fit must have neither;
- its cells on the GPU hub, the model hub and (for the headline configs) the home page.

A whole site's ``api/models.json`` must index its model files as the site
writes it: each model's name, link, config count and count of configs that fit.

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
    read_bytes,
    read_json,
    short_diff,
)
from backpressure.generator.ci.recheck import Checker, expected_items, recompute
from backpressure.generator.keys import InputKeys
from backpressure.generator.records import SEP
from backpressure.generator.sweep.combos import enumerate_combos

PERMALINK = re.compile(r"gpu/([^/]+)/([^/]+)/([^/]+)/([^/]+)/(?:kv-([^/]+)/)?$")
PAIR = re.compile(r"gpu/([^/#?]+)/([^/#?]+)/$")  # a GPU x model page
ANCHOR = re.compile(r"^([a-z0-9][a-z0-9._-]*?)-([0-9]+k?)(?:-kv-([a-z0-9][a-z0-9._-]*))?$")
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


def _id_from_anchor(path: str) -> str | None:
    """The config an anchored row's URL (``gpu/<gpu>/<model>/#<quant>-<ctx>``) names."""
    where, _, frag = path.partition("#")
    m = PAIR.search(where.split("?")[0].removesuffix("index.html").rstrip("/") + "/")
    a = ANCHOR.match(frag)
    if not (m and a):
        return None
    quant, ctx, kv = a.groups()
    base = SEP.join((*m.groups(), quant, ctx))
    return base if not kv else f"{base}{SEP}kv-{kv}"


def _id_from_permalink(path: str) -> str | None:
    if "#" in path:
        return _id_from_anchor(path)
    trimmed = path.split("?")[0].rstrip("/") + "/"
    m = PERMALINK.search(trimmed.removesuffix("index.html/"))
    if not m:
        return None
    device, model, quant, ctx, kv = m.groups()
    base = SEP.join((device, model, quant, ctx))
    return base if not kv else f"{base}{SEP}kv-{kv}"


def config_id_of(target: str) -> str | None:
    """The config id an id, permalink, anchored row's URL (``...#q4_k_m-8k``) names, or None."""
    if SEP in target and "/" not in target:
        return target
    return _id_from_permalink(target)


# -- whole runs -------------------------------------------------------------


def verify_configs(checker: Checker, cids: list[str]) -> Outcome:
    """Recompute ``cids`` and compare every file of each (siblings as the site published them)."""
    outcome = Outcome()
    fresh = dict(zip(cids, checker.recompute(cids), strict=True))
    lines = checker.lines(fresh.values())
    models = sorted({checker.combo(c).model for c in cids})
    refs = {m: checker.published_refs(m) for m in models}
    for cid in cids:
        row, curves = fresh[cid]
        outcome.checked.append(cid)
        outcome.findings += checker.check(row, curves, refs[row.model], lines[cid])
    return outcome


def verify_site(checker: Checker, sample: int | None, seed: int) -> Outcome:
    """Every config of the catalog (or a seeded sample) against the site, plus the indexes' ids."""
    from backpressure.generator.site.model_api import model_file

    index: dict[str, str] = {}
    counts: dict[str, tuple[int, int]] = {}
    for model in sorted({c.model for c in checker.combos.values()}):
        lines = checker.model_lines(model)
        index.update(lines)
        # a damaged line is left out of the fits count; its own check reports it
        counts[model] = (len(lines), sum(r.fits for r in checker.published_refs(model)))
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
        where = model_file(checker.combos[missing[0]].model)
        outcome.findings.append(
            Finding(where, f"{len(missing)} config(s) missing, e.g. {missing[0]}")
        )
    if extra:
        outcome.findings.append(
            Finding("api/models/", f"{len(extra)} config(s) the catalog has not, e.g. {extra[0]}")
        )
    outcome.findings += _check_index(checker, counts)
    return outcome


def _check_index(checker: Checker, counts: dict[str, tuple[int, int]]) -> list[Finding]:
    """``api/models.json`` against the model files it indexes: names, links and counts."""
    from backpressure.generator.site.model_api import INDEX, index_text

    published = read_bytes(checker.site / INDEX).decode("utf-8", errors="replace")
    expected = index_text(checker.cat, counts, checker.site_url)
    return [] if published == expected else [Finding(INDEX, short_diff(published, expected))]


def published_ids(published: Any) -> list[str]:
    """The config ids a published JSON names: a model's index, or one config's object from it."""
    items = published.get("configs") if isinstance(published, dict) else None
    if isinstance(items, list):
        ids = [i.get("id") if isinstance(i, dict) else None for i in items]
    else:
        ids = [published.get("id") if isinstance(published, dict) else None]
    if not ids or not all(isinstance(i, str) for i in ids):
        raise VerifyError("not a published model index or config (an object without ids)")
    return [str(i) for i in ids]


def verify_json(cat: Catalog, published: Any, site_url: str = "") -> Outcome:
    """A published model index (or one config's object from it) on its own: every field, typed."""
    cids = published_ids(published)
    items = published.get("configs", [published])
    combos = {c.id: c for c in enumerate_combos(cat)}
    unknown = [c for c in cids if c not in combos]
    if unknown:
        raise VerifyError(f"config {unknown[0]!r} is not in the catalog's sweep")
    expected = expected_items(
        cat, recompute(cat, InputKeys(cat), [combos[c] for c in cids]), site_url
    )
    outcome = Outcome(checked=cids)
    for item, cid in zip(items, cids, strict=True):
        fresh = strict_json.loads_strict(strict_json.dumps(expected[cid]))
        diffs = compare_fields(item, fresh)
        outcome.differences += [(f"{cid}: {k}", p, f) for k, p, f in diffs]
        outcome.findings += [Finding(cid, f"field {k}") for k, _, _ in diffs]
    return outcome


def render(outcome: Outcome, sampled: bool = False) -> str:
    """Human report: one line on a match; per file what differs on a mismatch."""
    n = len(outcome.checked)
    what = (
        "JSON line, anchored row, page and badge where it fits, hub cells"
        if not outcome.differences
        else "every field"
    )
    if outcome.matches:
        if n == 1:
            return f"verified: {outcome.checked[0]} matches the catalog ({what})"
        scope = "a sample of" if sampled else "all"
        return f"verified: {scope} {n:,} configs match the catalog ({what} of each)"
    if outcome.differences:
        lines = [
            f"MISMATCH: {len(outcome.differences)} field(s) differ in "
            f"{len({f.file for f in outcome.findings})} of {n:,} config(s)",
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
