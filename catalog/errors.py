"""Catalog errors that name the file, the entry and the field."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One validation problem, located as precisely as we can."""

    file: str
    entry: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        parts = [self.file]
        if self.entry is not None:
            parts.append(f"entry {self.entry!r}")
        if self.field is not None:
            parts.append(f"field {self.field}")
        return ": ".join([*parts, self.message])


class CatalogError(Exception):
    """Raised after validating everything, carrying every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def safe_repr(value: str, limit: int = 60) -> str:
    """Show a hostile string safely: escaped control characters, bounded length."""
    shown = value.encode("unicode_escape").decode("ascii").replace("'", "\\'")
    shown = shown if len(shown) <= limit else shown[: limit - 3] + "..."
    return f"'{shown}'"
