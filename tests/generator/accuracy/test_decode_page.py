"""The accuracy page's decode section: held-out summaries and every held-out miss listed."""

from __future__ import annotations

from backpressure.catalog.loader import load_catalog
from backpressure.generator.accuracy.decode import checks
from backpressure.generator.accuracy.page import decode_context


def test_every_held_out_miss_is_listed_and_no_fitted_row_is() -> None:
    cat = load_catalog()
    rows = checks(cat)
    ctx = decode_context(cat)
    held_misses = [c for c in rows if not c.fit and not c.inside]
    assert len(ctx["misses"]) == len(held_misses) > 0
    assert {m["source"] for m in ctx["misses"]} == {c.source for c in held_misses}
    errors = [abs(c.error) for c in sorted(held_misses, key=lambda c: -abs(c.error))]
    assert [f"{100 * c:.0f}" for c in errors] == [m["error"].strip(" %+-") for m in ctx["misses"]]


def test_summaries_count_the_held_out_half_only() -> None:
    cat = load_catalog()
    rows = checks(cat)
    by_kind = {k["kind"]: k for k in decode_context(cat)["kinds"]}
    assert set(by_kind) == {"dense", "MoE"}
    for kind, k in by_kind.items():
        assert k["n"] == sum(c.kind == kind and not c.fit for c in rows)
        assert k["fit"] == sum(c.kind == kind and c.fit for c in rows)
        inside = sum(c.kind == kind and not c.fit and c.inside for c in rows)
        assert k["inside"].startswith(f"{inside} of {k['n']} ")
