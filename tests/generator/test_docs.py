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


def test_the_cli_reference_is_the_help_text_exactly():
    # docs/cli.md's flag lists are generated from --help (make cli-docs): defaults
    # and ranges included, compared byte for byte.
    from backpressure.generator.cli import reference

    doc = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert reference.documented(doc) == list(cli.commands)
    assert reference.render(doc) == doc, "docs/cli.md is stale: run make cli-docs"
    assert "[default: site]" in doc  # a default, as --help prints it


def test_a_command_run_on_its_own_keeps_the_documented_help():
    # click builds a command's help option once and keeps it: a command run
    # directly (as tests and scripts do) must not change what --help prints after.
    from backpressure.generator.cli import reference
    from click.testing import CliRunner

    for name, command in cli.commands.items():
        assert CliRunner().invoke(command, ["-h"]).exit_code == 0, name
    doc = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert reference.render(doc) == doc
