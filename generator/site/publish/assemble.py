"""The site's filesystem side: one Writer, the mkdocs build, the shell, link checking.

Everything here writes (or checks what was written); nothing here decides what a page says.
Assembling and publishing the site tree is generator/site_tree.py.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import posixpath
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from html import unescape
from pathlib import Path

from backpressure.generator.site.render import to_json
from markupsafe import escape

SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
# Every site tree a build makes holds this file at its root (generator/site/publish/guard.py).
SITE_MARKER = ".backpressure-site"
TITLE_MARK = "BP-SHELL-TITLE"
DESC_MARK = "BP-SHELL-DESCRIPTION"
BODY_MARK = "BP-SHELL-CONTENT"
SHELL_DIR = "gpu/_shell"
_LINK = re.compile(r'(?:href|src)="([^"]*)"')
_SCHEME = re.compile(r"^[a-z]+:")


class SiteError(Exception):
    """The build produced something unsafe or broken; the old site stays in place."""


def safe_rel(rel: str) -> str:
    """``rel`` if it is a plain relative path of safe segments, else SiteError."""
    if rel == SITE_MARKER:
        return rel
    parts = rel.split("/")
    if rel.startswith("/") or "\\" in rel or not all(SEGMENT.match(p) for p in parts if p):
        raise SiteError(f"refusing to write outside the site: {rel!r}")
    if any(p in (".", "..") for p in parts):
        raise SiteError(f"refusing to write outside the site: {rel!r}")
    return rel


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """Hard-link ``src`` at ``dst``; copy where links are not possible (another device, say)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


class Writer:
    """Owns a directory: every file of the build is written through it, and counted."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.files = 0
        self.bytes = 0

    def path(self, rel: str) -> Path:
        """Where ``rel`` lands; refuses anything that would leave the root."""
        target = (self.root / safe_rel(rel)).resolve()
        if self.root not in target.parents:
            raise SiteError(f"refusing to write outside the site: {rel!r}")
        return target

    def write(self, rel: str, data: str | bytes) -> None:
        """Write one file (text as UTF-8, LF line ends)."""
        target = self.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        raw = data.encode("utf-8") if isinstance(data, str) else data
        target.write_bytes(raw)
        self.files += 1
        self.bytes += len(raw)

    def copy_tree(self, src: Path, rel: str) -> None:
        """Copy every file under ``src`` to ``rel`` in sorted order."""
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            self.write(posixpath.join(rel, path.relative_to(src).as_posix()), path.read_bytes())


def mkdocs_build(config_file: Path, docs_dir: Path, site_dir: Path) -> None:
    """Run a strict mkdocs build of ``docs_dir`` into ``site_dir``."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    # mkdocs reports through logging: collect its warnings so a strict failure
    # (or a bad config) says what went wrong, and keep its info chatter out of
    # our output.
    log = logging.getLogger("mkdocs")
    seen = _Collect()
    log.addHandler(seen)
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        cfg = load_config(
            config_file=str(config_file),
            docs_dir=str(docs_dir),
            site_dir=str(site_dir),
            strict=True,
        )
        build(cfg)
    except (MkDocsException, SystemExit) as exc:
        detail = "; ".join(seen.messages[:5])
        raise SiteError(f"mkdocs build failed: {exc} {detail}".strip()) from exc
    finally:
        log.removeHandler(seen)
        log.setLevel(level)


class _Collect(logging.Handler):
    """Keeps the text of every warning mkdocs logs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@dataclass(frozen=True, slots=True)
class Shell:
    """The chrome of an mkdocs page, split around its content."""

    head: str
    tail: str

    def wrap(self, title: str, description: str, body: str) -> str:
        """A full HTML page: this chrome around ``body``."""
        t, d = str(escape(title)), str(escape(description))
        head = self.head.replace(TITLE_MARK, t).replace(DESC_MARK, d)
        return head + body + self.tail.replace(TITLE_MARK, t)


def shell_rel(depth: int) -> str:
    """The scratch page whose output sits ``depth`` directories deep (as config pages do)."""
    return "/".join([SHELL_DIR, *[f"d{i}" for i in range(depth - 2)]])


def read_shell(site_dir: Path, depth: int) -> Shell:
    """Load the built shell page for ``depth`` and split it at the content marker."""
    html = (site_dir / shell_rel(depth) / "index.html").read_text(encoding="utf-8")
    mark = f"<p>{BODY_MARK}</p>"
    if html.count(mark) != 1:
        raise SiteError(f"shell page at depth {depth}: content marker not found exactly once")
    head, tail = _lean_config(html).split(mark)
    return Shell(_compact(head), _compact(tail))


_CONFIG = re.compile(r'(<script id="__config" type="application/json">)(.*?)(</script>)', re.S)


def _lean_config(html: str) -> str:
    """The theme's page config without its interface strings: about 0.5 kB on each page.

    The strings label search results, the copy button and the version menu; a
    shell page has none of them (no search box, no copy buttons, one version),
    so the theme's script never looks them up there.
    """

    def lean(m: re.Match[str]) -> str:
        config = json.loads(m.group(2))
        config["translations"] = {}
        return m.group(1) + str(to_json(config)) + m.group(3)

    return _CONFIG.sub(lean, html)


def _compact(html: str) -> str:
    """The chrome without indentation and blank lines: a kilobyte on each of 28,000 pages.

    The chrome holds no ``<pre>`` or ``<textarea>``, where whitespace would matter.
    """
    if "<pre" in html or "<textarea" in html:
        return html
    lines = [line.strip() for line in html.splitlines()]
    return "\n".join(line for line in lines if line) + ("\n" if html.endswith("\n") else "")


def drop_shells(site_dir: Path) -> None:
    """Remove the shell pages from the output once they have been read."""
    shutil.rmtree(site_dir / SHELL_DIR, ignore_errors=True)


def sitemap(site_url: str, pages: list[str]) -> dict[str, bytes]:
    """A sitemap without dates (mkdocs' changes with every build): ``sitemap.xml`` and its gzip.

    ``pages`` are site-relative directory URLs. Without a ``site_url`` there are
    no absolute addresses to list, so there is no sitemap.
    """
    if not site_url:
        return {}
    base = site_url.rstrip("/") + "/"
    locs = "".join(f"<url><loc>{escape(base + p)}</loc></url>\n" for p in sorted(pages))
    xml = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{locs}</urlset>\n"
    ).encode()
    return {"sitemap.xml": xml, "sitemap.xml.gz": gzip.compress(xml, mtime=0)}


def site_files(site_dir: Path) -> set[str]:
    """Every file of the built site, as site-relative POSIX paths."""
    out = set()
    for base, _dirs, files in os.walk(site_dir):
        rel = Path(base).relative_to(site_dir).as_posix()
        for name in files:
            out.add(name if rel == "." else f"{rel}/{name}")
    return out


def page_links(html: str) -> list[str]:
    """The href/src targets of a page that point into the site (no schemes, no other hosts).

    A target is read as the browser reads it: character references decoded,
    then the query and fragment dropped.
    """
    targets = {_path_part(unescape(t)) for t in set(_LINK.findall(html))}
    return sorted(
        t for t in targets if t and not _SCHEME.match(t.lower()) and not t.startswith("//")
    )


def _path_part(target: str) -> str:
    return target.split("#", 1)[0].split("?", 1)[0]


def broken_links(site_dir: Path, files: set[str], limit: int = 20) -> list[str]:
    """Relative href/src targets in the HTML pages that resolve to no file (first ``limit``)."""
    pages = (
        (page, page_links((site_dir / page).read_text(encoding="utf-8")))
        for page in sorted(f for f in files if f.endswith(".html"))
    )
    return check_links(pages, files, limit)


def _resolve(base: str, target: str) -> str:
    # Root-absolute links (mkdocs writes them on 404.html) resolve from the site root.
    joined = target.lstrip("/") if target.startswith("/") else posixpath.join(base, target)
    rel = posixpath.normpath(joined)
    if rel in ("", "."):
        return "index.html"
    return posixpath.join(rel, "index.html") if target.endswith("/") else rel


def check_links(
    pages: Iterable[tuple[str, Iterable[str]]], files: set[str], limit: int = 20
) -> list[str]:
    """Of each (page, link targets), the targets that resolve to no file (first ``limit``)."""
    bad: list[str] = []
    seen: dict[tuple[int, str], bool] = {}
    for page, targets in pages:
        base = posixpath.dirname(page)
        depth = base.count("/") + 1 if base else 0
        up = "../" * depth
        for target in targets:
            # A link that climbs to the root first resolves the same from every
            # page as deep: check it once (config pages share most of theirs).
            key = (depth, target) if target.startswith((up, "/")) else None
            ok = seen.get(key) if key else None
            if ok is None:
                rel = _resolve(base, target)
                ok = not rel.startswith("../") and rel != ".." and rel in files
                if key:
                    seen[key] = ok
            if not ok:
                bad.append(f"{page}: {target}")
                if len(bad) >= limit:
                    return bad
    return bad
