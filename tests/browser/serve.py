"""Serve a built site on 127.0.0.1 and drive Debian's chromium against it.

Used by the browser test and, run as a script, to take screenshots for review:
``python tests/browser/serve.py SITE_DIR OUT_DIR PATH [PATH ...]``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _Pages(_Quiet):
    """Like GitHub Pages: a path with no file gets the site's ``404.html``, status 404."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.is_file():
            super().send_error(code, message, explain)
            return
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def wait_until(page: Any, expression: str, timeout_s: float = 30.0) -> None:
    """Poll ``expression`` in ``page`` until it is truthy.

    Playwright's ``wait_for_function`` evaluates its predicate with ``eval`` inside
    the page, which the site's Content-Security-Policy refuses; ``evaluate``
    goes through the DevTools protocol, which the policy does not govern.
    """
    waited = 0.0
    while not page.evaluate(expression):
        if waited >= timeout_s:
            raise AssertionError(f"still false after {timeout_s:g} s: {expression}")
        page.wait_for_timeout(50)
        waited += 0.05


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve ``site`` on an ephemeral 127.0.0.1 port as a static host would; yields its URL."""
    handler = functools.partial(_Pages, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def screenshots(site: Path, out: Path, paths: list[str], width: int = 1280) -> list[Path]:
    """Full-page PNGs of ``paths`` (site-relative) after charts have rendered."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    shots = []
    with serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": 900})
        for rel in paths:
            page.goto(base + rel)
            page.wait_for_load_state("networkidle")
            if page.query_selector(".bp-chart"):
                page.wait_for_selector(".bp-chart[data-rendered]", timeout=15000)
            name = rel.strip("/").replace("/", "_") or "home"
            shot = out / f"{name}.png"
            page.screenshot(path=str(shot), full_page=True)
            shots.append(shot)
        browser.close()
    return shots


if __name__ == "__main__":
    for shot in screenshots(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]):
        sys.stdout.write(f"{shot}\n")
