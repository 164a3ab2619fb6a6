"""Feed Pagefind one page at a time, in sorted order, so its index is the same everywhere.

``pagefind --site DIR`` meets files in the order the filesystem lists them
(ext4 by a hash seeded per filesystem, tmpfs by age), and its bundle depends on
that order. Its service mode (``pagefind --service``, the protocol of the
``pagefind`` Python package: base64 JSON messages ended by a comma) takes pages
one by one instead. The package's own client waits a tenth of a second for each
reply, which for 28,000 pages is most of an hour, so this is a small
synchronous client of the same protocol: each page is sent, then its reply read,
so pages are indexed exactly in the order given; the finished bundle comes back
over the pipe and is written here.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import IO, Any


class FeedError(RuntimeError):
    """Pagefind refused a request or stopped; the message says which."""


class Feed:
    """One Pagefind service process holding one index."""

    def __init__(self) -> None:
        from pagefind.service import get_executable

        binary = get_executable()
        if binary is None:
            raise FeedError("the pagefind binary is not installed")
        self._proc = subprocess.Popen(
            [str(binary), "--service"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._id = 0
        self.index_id = int(self._send({"type": "NewIndex", "config": None})["index_id"])

    def _send(self, payload: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        message = base64.b64encode(
            json.dumps({"message_id": self._id, "payload": payload}).encode()
        )
        stdin, stdout = self._pipes()
        try:
            stdin.write(message + b",")
            stdin.flush()
        except OSError as exc:
            raise FeedError(f"pagefind stopped: {exc}") from exc
        reply = _read_until_comma(stdout)
        try:
            data = json.loads(base64.b64decode(reply))
        except ValueError as exc:
            raise FeedError(f"pagefind sent an unreadable reply ({reply[:40]!r})") from exc
        answer = data.get("payload", {}) if isinstance(data, dict) else {}
        if data.get("message_id") != self._id or answer.get("type") == "Error":
            raise FeedError(f"pagefind refused {payload['type']}: {answer.get('message', answer)}")
        return dict(answer)

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        return self._proc.stdin, self._proc.stdout

    def add(self, rel: str, html: str) -> None:
        """Index one page at its site-relative path (the result URL is made from it)."""
        self._send(
            {
                "type": "AddFile",
                "index_id": self.index_id,
                "file_path": rel,
                "url": None,
                "file_contents": html,
            }
        )

    def write(self, output: Path) -> None:
        """Write the bundle into ``output``.

        The bundle is taken over the pipe (``GetFiles``) and written here: the
        service's own ``WriteFiles`` replies before its writes are done, and a
        service stopped then leaves files cut short.
        """
        files = self._send({"type": "GetFiles", "index_id": self.index_id}).get("files")
        if not isinstance(files, list) or not files:
            raise FeedError("pagefind returned no bundle")
        for item in sorted(files, key=lambda f: str(f.get("path"))):
            rel = str(item.get("path", ""))
            parts = rel.split("/")
            if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise FeedError(f"pagefind returned a file outside its bundle: {rel!r}")
            target = output / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(item.get("content", "")))

    def close(self) -> None:
        """Stop the service."""
        stdin, stdout = self._pipes()
        stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        stdout.close()


def _read_until_comma(stream: IO[bytes]) -> bytes:
    chunks = []
    while True:
        ch = stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1)
        if not ch:
            raise FeedError("pagefind stopped before it replied")
        chunks.append(ch)
        if b"," in ch:
            break
    raw = b"".join(chunks)
    reply, _, rest = raw.partition(b",")
    if rest:  # one request at a time: nothing may follow its reply
        raise FeedError("pagefind replied more than asked")
    return reply


def index_pages(site_dir: Path, pages: list[str], output: Path) -> None:
    """Index ``pages`` of ``site_dir`` in sorted order into a bundle at ``output``."""
    feed = Feed()
    try:
        for rel in sorted(pages):
            feed.add(rel, (site_dir / rel).read_text(encoding="utf-8"))
        feed.write(output.resolve())
    finally:
        feed.close()
