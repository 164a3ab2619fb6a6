"""Site search: a Pagefind index written beside the pages after they are built.

Pagefind splits its index into small content-addressed chunks, so a visitor
downloads only the chunks a query touches; the alternative, mkdocs-material's
lunr search, ships one index of every page before the first result.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from generator.assemble import SiteError


def index(site_dir: Path) -> None:
    """Index every page of ``site_dir`` that carries ``data-pagefind-body``."""
    cmd = [sys.executable, "-m", "pagefind", "--site", str(site_dir), "--silent"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise SiteError(f"cannot run pagefind: {exc}") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SiteError("pagefind failed: " + " / ".join(detail or ["no output"]))
    if not (site_dir / "pagefind" / "pagefind.js").is_file():
        raise SiteError("pagefind wrote no index")
