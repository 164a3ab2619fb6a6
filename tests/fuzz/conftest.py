"""Say how many cases the fuzz campaign tried, at the end of the run."""

from __future__ import annotations

from tests.fuzz.test_campaign import TRIED


def pytest_terminal_summary(terminalreporter) -> None:
    if any(TRIED.values()):
        parts = ", ".join(f"{name} {n:,}" for name, n in TRIED.items())
        terminalreporter.write_line(f"fuzz campaign: {parts} cases tried, no traceback")
