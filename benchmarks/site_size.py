"""What a built site weighs: pages, average and largest page, bytes per top folder.

    python benchmarks/site_size.py SITE_DIR [--report FILE]

Counts file contents only (directories take no space on a static host), so the
total is what GitHub Pages holds against its 1 GB limit for a published site.
The issue's target for pages: 60 KB or less on average.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def measure(site: Path) -> list[str]:
    """Report lines for the site built in ``site``."""
    pages = sorted(p for p in site.rglob("*.html") if p.name == "index.html")
    if not pages:
        raise SystemExit(f"{site}: no pages (is it a built site?)")
    sizes = {p: p.stat().st_size for p in pages}
    folders: dict[str, int] = {}
    files = total = 0
    for p in site.rglob("*"):
        if p.is_file():
            top = p.relative_to(site).parts[0] if len(p.relative_to(site).parts) > 1 else "."
            folders[top] = folders.get(top, 0) + p.stat().st_size
            files += 1
            total += p.stat().st_size
    largest = max(sizes, key=lambda p: sizes[p])
    page_bytes = sum(sizes.values())
    lines = [
        f"python benchmarks/site_size.py {site.name}",
        f"pages: {len(pages):,}, {page_bytes / 1e6:,.0f} MB, "
        f"average {page_bytes / len(pages) / 1024:.1f} KiB "
        f"(largest {sizes[largest] / 1024:.1f} KiB: {largest.relative_to(site).parent}/)",
        f"site: {files:,} files, {total / 1e9:.3f} GB",
        "by top folder [MB]: "
        + ", ".join(
            f"{name} {size / 1e6:,.1f}"
            for name, size in sorted(folders.items(), key=lambda kv: -kv[1])
        ),
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", type=Path)
    ap.add_argument("--report", type=Path, default=None, help="also write the lines here")
    args = ap.parse_args()
    lines = measure(args.site)
    sys.stdout.write("\n".join(lines) + "\n")
    if args.report:
        args.report.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
