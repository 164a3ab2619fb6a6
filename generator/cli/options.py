"""Pieces every command shares: the error that exits 2, catalog loading, common flags."""

from __future__ import annotations

import logging
import math
import os
import re
from pathlib import Path
from typing import Any

import click
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.loader import Catalog, load_catalog


class Whole(click.IntRange):
    """An integer flag: ``1.5`` is refused as not a whole number.

    ``click.IntRange`` says "'1.5' is not a valid integer range", which names
    the type, not the mistake.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Parse as an integer, naming a fraction as such, then check the range."""
        if not isinstance(value, int):
            try:
                value = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a whole number.", param, ctx)
        return super().convert(value, param, ctx)


class SafePath(click.Path):
    """A path flag that refuses a NUL byte with one line.

    ``click.Path`` stats the path, and ``os.stat`` raises ``ValueError`` (not
    ``OSError``, which click turns into a message) on an embedded NUL.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Refuse a NUL byte, then check the path as ``click.Path`` does."""
        if b"\0" in os.fsencode(value):
            self.fail("a path cannot contain a NUL byte.", param, ctx)
        return super().convert(value, param, ctx)


class BadInput(click.ClickException):
    """One clear line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        """Print the message as one line per problem, each prefixed with the program name."""
        for line in self.format_message().splitlines():
            click.echo(f"backpressure: error: {line}", err=True)


def load(catalog_dir: Path | None) -> Catalog:
    """Load the catalog or fail with every problem, one per line."""
    try:
        return load_catalog(catalog_dir)
    except CatalogError as exc:
        raise BadInput("\n".join(str(p) for p in exc.problems)) from exc


catalog_option = click.option(
    "--catalog",
    "catalog_dir",
    type=SafePath(file_okay=False, path_type=Path),
    default=None,
    help="Catalog directory (default: the bundled catalog).",
)

jobs_option = click.option(
    "--jobs",
    type=Whole(min=1, max=256),
    default=None,
    help="Worker processes (default: one per core).",
)


# Every command carries these itself, not only through the group: click caches a
# command's help option the first time it is built, so a command run on its own
# would otherwise print a different --help than docs/cli.md shows.
COMMAND_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "show_default": True}

_CONTEXT = re.compile(r"(\d+)([kKmM]?)")
_SUFFIX = {"": 1, "k": 1024, "m": 1024 * 1024}
MAX_CONTEXT = 2**25  # far above any model's; more is a typo


class ContextTokens(click.ParamType[int]):
    """A context length in tokens, as a number or as the site writes it: ``8k``, ``128k``, ``1M``.

    ``k`` is 1,024 tokens and ``M`` 1,048,576, as model configs count contexts
    (an 8k context is 8,192 tokens).
    """

    name = "tokens"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        """The token count, or a usage error naming the value."""
        text = str(value).strip().replace(",", "").replace("_", "")
        match = _CONTEXT.fullmatch(text)
        tokens = int(match.group(1)) * _SUFFIX[match.group(2).lower()] if match else 0
        if not 1 <= tokens <= MAX_CONTEXT:
            self.fail(
                f"{value!r} is not a context length from 1 to {MAX_CONTEXT:,} tokens "
                "(tokens, or 8k, 128k, 1M)",
                param,
                ctx,
            )
        return tokens


CONTEXT = ContextTokens()


class Finite(click.FloatRange):
    """A float flag that is a real number: ``nan``, ``inf`` and ``1e999`` are refused.

    ``click.FloatRange`` lets NaN through any bound (every comparison with NaN
    is false) and infinity through an open upper one.
    """

    name = "number"

    def __init__(
        self,
        min: float | None = None,  # click's own parameter names
        max: float | None = None,
        min_open: bool = False,
        max_open: bool = False,
    ) -> None:
        super().__init__(min, max, min_open, max_open, clamp=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Parse, refuse what is not finite, then check the range."""
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


def positive(max: float) -> Finite:
    """A finite number above 0 and at most ``max``."""
    return Finite(min=0, max=max, min_open=True)


def environment_error(exc: OSError) -> BadInput:
    """A failure of the machine rather than of the input (read-only, full disk), as one line."""
    what = exc.strerror or str(exc) or type(exc).__name__
    where = f"{exc.filename}: " if exc.filename else ""
    return BadInput(f"{where}{what}")


class _Notes(logging.Handler):
    """The library's warnings (a damaged cache recomputed, say) as one stderr line each."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"backpressure: note: {record.getMessage()}", err=True)


def show_notes() -> None:
    """Print what the ``backpressure`` logger warns about (once per process)."""
    log = logging.getLogger("backpressure")
    if not any(isinstance(h, _Notes) for h in log.handlers):
        log.addHandler(_Notes(logging.WARNING))
        log.setLevel(logging.WARNING)
