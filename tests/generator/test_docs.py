"""Docs cannot drift: every CLI flag and every calibration constant is documented."""

from __future__ import annotations

import click
import pytest
from backpressure.generator.cli.main import cli
from backpressure.generator.paths import ROOT as ROOT_DIR

DOCS = ROOT_DIR / "docs"


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_flag_is_in_the_cli_docs(name):
    text = (DOCS / "cli.md").read_text()
    assert f"`backpressure {name}" in text
    command = cli.commands[name]
    for param in command.params:
        if isinstance(param, click.Option):
            flag = max(param.opts, key=len)
            if flag != "--help":
                assert flag in text, f"{name} {flag} is not documented in docs/cli.md"
