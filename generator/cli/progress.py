"""The sweep's progress on stderr: a bar on a terminal, a line every few seconds otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

import click
from backpressure.generator.sweep.run import Progress

PLAIN_EVERY_S = 10.0  # how often a non-terminal (a CI log) gets a progress line


def make_progress(stream: TextIO | None = None) -> tuple[Progress, Callable[[], None]]:
    """A progress callback and the function that closes it (call it once the sweep ends)."""
    out = stream or sys.stderr
    if out.isatty():
        from tqdm import tqdm  # only a terminal needs the bar

        bar = tqdm(total=0, unit="config", file=out, dynamic_ncols=True)

        def on_tty(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        return on_tty, bar.close
    start = time.monotonic()
    last = [start - PLAIN_EVERY_S]

    def plain(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < PLAIN_EVERY_S and done < total:
            return
        last[0] = now
        rate = done / max(now - start, 1e-9)
        eta = (total - done) / rate if rate else 0.0
        click.echo(f"sweep: {done:,}/{total:,} configs, {rate:,.0f}/s, ETA {eta:,.0f} s", file=out)

    return plain, lambda: None
