"""Site build at full catalog size: page count, page bytes, build time, search cost.

Synthetic sweep output for every combination the real sweep enumerates (capacity
from the engine, curves from the test fixture's stand-in), then:

1. the real build (mkdocs for hubs, shell-wrapped config pages, Pagefind);
2. a sample of config pages pushed through mkdocs itself, with mkdocs-material's
   lunr search on, to show what the all-mkdocs design would cost at full size;
3. in headless chromium: the bytes a visitor downloads from typing a query to the
   first Pagefind result, and how long that takes.

With ``--incremental``, instead: a full build, then rebuilds after an edit to
one GPU's YAML (``--gpu``; its bandwidth), timed phase by phase, with the
incremental-to-full ratio with and without the mkdocs and Pagefind steps
(see :func:`incremental`).

Usage: python benchmarks/bench_site.py [--limit N] [--sample N] [--keep DIR]
       python benchmarks/bench_site.py --incremental [--limit N] [--gpu ID] [--report FILE]
       (the committed report: --report benchmarks/site-incremental.txt)
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backpressure.catalog.loader import Catalog, load_catalog  # noqa: E402
from backpressure.generator.paths import MKDOCS_YML  # noqa: E402
from backpressure.generator.site import render  # noqa: E402
from backpressure.generator.site.build import SiteModel, build_site  # noqa: E402
from backpressure.generator.site.configs import render_config  # noqa: E402
from backpressure.generator.site.pages import Limits  # noqa: E402

from tests.generator.fixtures import all_combos, write_fixture  # noqa: E402

QUERY = "4090 llama 3.1 8b q4"
TARGET = "gpu/rtx-4090/llama-3.1-8b/"


def combos(cat: Catalog, limit: int) -> list[tuple[str, str, str, int]]:
    try:
        from backpressure.generator.sweep.combos import enumerate_combos
    except ImportError:
        return list(all_combos(cat, limit))
    out = [(c.device, c.model, c.quant, c.context) for c in enumerate_combos(cat)]
    if not limit or limit >= len(out):
        return out
    # An even stride keeps every device and model in a smaller run; the query's target stays in.
    picked = out[:: max(1, len(out) // limit)][:limit]
    target = ("rtx-4090", "llama-3.1-8b", "q4_k_m", 8192)
    return sorted({*picked, target}) if target in out else picked


def site_stats(site: Path) -> dict[str, float]:
    html = [p for p in site.rglob("*.html")]
    sizes = [p.stat().st_size for p in html]
    every = [p.stat().st_size for p in site.rglob("*") if p.is_file()]
    configs = [p.stat().st_size for p in html if len(p.relative_to(site).parts) >= 6]
    return {
        "pages": len(html),
        "html_bytes": sum(sizes),
        "avg_page_bytes": sum(sizes) / len(sizes),
        "avg_config_page_bytes": sum(configs) / max(len(configs), 1),
        "max_page_bytes": max(sizes),
        "files": len(every),
        "site_bytes": sum(every),
        "pagefind_bytes": sum(
            p.stat().st_size for p in (site / "pagefind").rglob("*") if p.is_file()
        ),
    }


def mkdocs_sample(cat: Catalog, sweep: Path, n: int) -> dict[str, float]:
    """Push ``n`` config pages through mkdocs (material + lunr search) and time it."""
    from backpressure.generator.results_io import read_curves, read_results
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    rows = read_results(sweep)[:n]
    m = SiteModel(cat, rows, read_curves(sweep), "")
    env = render.make_env()
    lim = Limits.of(cat)
    with tempfile.TemporaryDirectory() as tmp:
        docs, site = Path(tmp) / "docs", Path(tmp) / "site"
        docs.mkdir()
        (docs / "index.md").write_text("# Home\n")
        for row in rows:
            _title, _description, body = render_config(env, m, row, lim)
            page = docs / row.permalink.rstrip("/")
            page.parent.mkdir(parents=True, exist_ok=True)
            page.with_suffix(".md").write_text(f"---\ntitle: {row.config_id}\n---\n\n{body}\n")
        cfg = load_config(
            config_file=str(MKDOCS_YML),
            docs_dir=str(docs),
            site_dir=str(site),
            plugins=["search"],
            nav=[{"Home": "index.md"}],
            strict=False,
        )
        t = time.perf_counter()
        build(cfg)
        secs = time.perf_counter() - t
        index = site / "search" / "search_index.json"
        raw = index.read_bytes()
        return {
            "pages": n,
            "seconds": secs,
            "index_bytes": len(raw),
            "index_gzip_bytes": len(gzip.compress(raw)),
        }


def pagefind_query(site: Path) -> dict[str, float]:
    """Bytes fetched and time taken from typing the query to the first result."""
    from playwright.sync_api import sync_playwright

    from tests.browser.serve import CHROMIUM, CHROMIUM_ARGS, serve

    with serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(base)
        page.wait_for_selector("#bp-search input")
        fetched: list[tuple[str, int]] = []
        page.on("requestfinished", lambda r: fetched.append((r.url, r.sizes()["responseBodySize"])))
        t = time.perf_counter()
        page.fill("#bp-search input", QUERY)
        page.wait_for_selector(f'.pagefind-ui__result-link[href*="{TARGET}"]', timeout=60000)
        secs = time.perf_counter() - t
        first = page.eval_on_selector_all(
            ".pagefind-ui__result-link", "els => els.map(e => e.href)"
        )
        browser.close()
    return {
        "seconds_to_result": secs,
        "requests": len(fetched),
        "bytes": sum(b for _, b in fetched),
        "top_results": [u.split("/", 3)[-1] for u in first[:3]],
    }


EXTERNAL = ("mkdocs", "pagefind")  # the steps the 0.15 target leaves out


def _phases(phases: tuple[tuple[str, float], ...]) -> dict[str, float]:
    out = dict(phases)
    out["total"] = sum(out.values())
    out["before mkdocs"] = out["total"] - sum(out.get(k, 0.0) for k in EXTERNAL)
    return out


def _edit_bandwidth(catalog: Path, gpu: str) -> None:
    """Raise one GPU's memory bandwidth by a tenth in a catalog copy."""
    path = catalog / "gpus" / f"{gpu}.yaml"
    text = path.read_text(encoding="utf-8")
    m = re.search(r"^bandwidth_bytes_per_s: ([0-9_]+)$", text, re.M)
    if m is None:
        raise SystemExit(f"{path}: no bandwidth_bytes_per_s line")
    new = int(m.group(1).replace("_", "")) * 11 // 10
    path.write_text(text.replace(m.group(0), f"bandwidth_bytes_per_s: {new}"), encoding="utf-8")


def incremental(limit: int, gpu: str) -> list[str]:
    """Full build vs rebuilds after one GPU edit; returns the report lines.

    Runs, in order, on one output directory and its render cache:

    - ``full``: the first build (no site, no cache);
    - ``full again``: ``--full`` over it (every page re-rendered);
    - ``no change``: a rebuild of the same inputs;
    - ``one GPU``: after the edit (the GPU's bandwidth +10 %);
    - ``next edit``: after the same edit again: the steady state, where the
      workspace is the tree of two builds ago and the files the edit before
      made obsolete are freed (see ``RenderCache.empty_trash``);
    - ``cold``: after the edit again, the site and the workspace deleted and only
      the render cache kept (a CI job that restores the cache alone).

    The synthetic sweep is rewritten in full after each edit and is not timed:
    ``backpressure build``'s own sweep recomputes only the edited GPU's rows.
    """
    work = Path(tempfile.mkdtemp(prefix="bench-incremental-"))
    lines: list[str] = []
    try:
        catalog = work / "catalog"
        shutil.copytree(ROOT / "catalog", catalog, ignore=shutil.ignore_patterns("*.py", "__*"))
        cat = load_catalog(catalog)
        todo = combos(cat, limit)
        sweep, site = work / "sweep", work / "site"
        write_fixture(sweep, todo, cat)
        runs: dict[str, tuple[dict[str, float], dict[str, float]]] = {}

        def run(name: str, **kwargs: bool) -> None:
            r = build_site(sweep, site, catalog, **kwargs)
            wall, cpu = _phases(r.phases), _phases(r.cpu)
            runs[name] = wall, cpu
            lines.append(
                f"{name}: {wall['total']:.1f} s ({cpu['total']:.1f} s CPU), "
                f"{len(r.rendered):,} configs rendered, {len(r.changed):,} files changed, "
                f"{len(r.removed):,} removed"
            )
            lines.append("    " + ", ".join(f"{k} {v:.2f}" for k, v in r.phases))
            print("\n".join(lines[-2:]), flush=True)

        lines += [
            f"python benchmarks/bench_site.py --incremental --gpu {gpu}"
            + (f" --limit {limit}" if limit else ""),
            f"{len(todo):,} configs (synthetic sweep); the edit: {gpu} bandwidth +10 %",
            f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start "
            "(wall times stretch under load; CPU times, this process and its children, less so)",
            "phases [s]: gather (sweep tables, catalog, scenario pages), mkdocs (hub pages), "
            "configs (config pages, JSON index, sitemap), pagefind, validate (links), "
            "compare (with the site replaced), publish (swap, cache index, prune)",
            "",
        ]
        print("\n".join(lines), flush=True)
        run("full")
        run("full again", full=True)
        run("no change")
        for name in ("one GPU", "next edit"):
            _edit_bandwidth(catalog, gpu)
            write_fixture(sweep, todo, load_catalog(catalog))
            run(name)
        _edit_bandwidth(catalog, gpu)
        write_fixture(sweep, todo, load_catalog(catalog))
        shutil.rmtree(site)
        shutil.rmtree(work / "site.old", ignore_errors=True)
        run("cold")
        lines.append("")
        for ref in ("full", "full again"):
            for inc in ("one GPU", "next edit", "cold"):
                (a, ac), (b, bc) = runs[inc], runs[ref]
                key = "before mkdocs"
                lines.append(
                    f"{inc} / {ref}: {a[key] / b[key]:.3f} before the mkdocs and Pagefind steps "
                    f"({a[key]:.1f} s / {b[key]:.1f} s; CPU {ac[key] / bc[key]:.3f}), "
                    f"{a['total'] / b['total']:.3f} with them (CPU {ac['total'] / bc['total']:.3f})"
                )
        for name in ("full", "no change", "one GPU", "next edit"):
            w = runs[name][0]
            lines.append(
                f"{name}: the mkdocs step (hub pages) {w['mkdocs']:.1f} s, "
                f"Pagefind {w['pagefind']:.1f} s"
            )
        lines.append(f"load average {os.getloadavg()[0]:.1f} at the end")
        print("\n".join(lines[-12:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="configs (0 = the full sweep)")
    ap.add_argument(
        "--sample", type=int, default=500, help="config pages for the mkdocs comparison"
    )
    ap.add_argument("--keep", type=Path, default=None, help="keep the built site here")
    ap.add_argument("--incremental", action="store_true", help="time rebuilds after one edit")
    ap.add_argument("--gpu", default="rtx-3060-12gb", help="the GPU --incremental edits")
    ap.add_argument("--report", type=Path, default=None, help="--incremental: write lines here")
    args = ap.parse_args()
    if args.incremental:
        lines = incremental(args.limit, args.gpu)
        if args.report:
            args.report.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return
    cat = load_catalog()
    work = Path(tempfile.mkdtemp(prefix="bench-site-"))
    try:
        todo = combos(cat, args.limit)
        t = time.perf_counter()
        write_fixture(work / "sweep", todo, cat)
        print(f"synthetic sweep: {len(todo):,} configs in {time.perf_counter() - t:.1f} s")
        site = args.keep or work / "site"
        t = time.perf_counter()
        build_site(work / "sweep", site)
        build_s = time.perf_counter() - t
        s = site_stats(site)
        print(f"build: {build_s:.1f} s ({build_s / len(todo) * 1000:.1f} ms per config)")
        for k, v in s.items():
            print(f"  {k}: {v:,.0f}")
        q = pagefind_query(site)
        print(
            f"pagefind '{QUERY}': {q['bytes']:,} bytes in {q['requests']} requests, "
            f"{q['seconds_to_result'] * 1000:.0f} ms to the first result; top: {q['top_results']}"
        )
        if args.sample:
            mk = mkdocs_sample(cat, work / "sweep", min(args.sample, len(todo)))
            per = mk["seconds"] / mk["pages"]
            scale = len(todo) / mk["pages"]
            full_mb = mk["index_bytes"] * scale / 1e6
            full_gz = mk["index_gzip_bytes"] * scale / 1e6
            print(
                f"all-mkdocs sample: {mk['pages']} config pages in {mk['seconds']:.1f} s "
                f"({per * 1000:.0f} ms/page, about {per * len(todo) / 60:.0f} min "
                f"for {len(todo):,} configs); "
                f"lunr index {mk['index_bytes']:,} bytes ({mk['index_gzip_bytes']:,} gzip), "
                f"about {full_mb:.0f} MB ({full_gz:.1f} MB gzip) for {len(todo):,} configs, "
                "all downloaded before the first result"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            shutil.rmtree(work / "sweep", ignore_errors=True)


if __name__ == "__main__":
    main()
