"""Site build at full catalog size: page count, page bytes, build time, search cost.

Synthetic sweep output for every combination the real sweep enumerates (capacity
from the engine, curves from the test fixture's stand-in), then:

1. the real build (mkdocs for hubs, shell-wrapped config pages, Pagefind);
2. a sample of config pages pushed through mkdocs itself, with mkdocs-material's
   lunr search on, to show what the all-mkdocs design would cost at full size;
3. in headless chromium: the bytes a visitor downloads from typing a query to the
   first Pagefind result, and how long that takes.

Usage: python benchmarks/bench_site.py [--limit N] [--sample N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.loader import Catalog, load_catalog  # noqa: E402
from generator import charts, render  # noqa: E402
from generator.pages import config_context  # noqa: E402
from generator.site import MKDOCS_YML, SiteModel, build_site  # noqa: E402
from generator.site_svg import fallbacks  # noqa: E402
from tests.generator.fixtures import all_combos, write_fixture  # noqa: E402

QUERY = "4090 llama 3.1 8b q4"
TARGET = "gpu/rtx-4090/llama-3.1-8b/"


def combos(cat: Catalog, limit: int) -> list[tuple[str, str, str, int]]:
    try:
        from generator.sweep import enumerate_combos
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
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    from generator.results_io import read_curves, read_results

    rows = read_results(sweep)[:n]
    m = SiteModel(cat, rows, read_curves(sweep), "")
    env = render.make_env()
    with tempfile.TemporaryDirectory() as tmp:
        docs, site = Path(tmp) / "docs", Path(tmp) / "site"
        docs.mkdir()
        (docs / "index.md").write_text("# Home\n")
        for row in rows:
            c = m.curves.get(row.config_id)
            data = charts.datasets_for(row, c, 2000.0)
            ctx = config_context(cat, row, c, m.by_model, data)
            ctx.update(fallback=fallbacks(data), badge_alt="", snippet="")
            body = env.get_template("config.html.j2").render(**ctx)
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="configs (0 = the full sweep)")
    ap.add_argument(
        "--sample", type=int, default=500, help="config pages for the mkdocs comparison"
    )
    ap.add_argument("--keep", type=Path, default=None, help="keep the built site here")
    args = ap.parse_args()
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
                f"({per * 1000:.0f} ms/page, about {per * len(todo) / 60:.0f} min at full size); "
                f"lunr index {mk['index_bytes']:,} bytes ({mk['index_gzip_bytes']:,} gzip), "
                f"about {full_mb:.0f} MB ({full_gz:.1f} MB gzip) at full size, "
                "all downloaded before the first result"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            shutil.rmtree(work / "sweep", ignore_errors=True)


if __name__ == "__main__":
    main()
