"""The ``backpressure`` command line: thin click commands over plain functions."""

from __future__ import annotations

import click
from backpressure.catalog.errors import CatalogError
from backpressure.generator.cli.build import build_command
from backpressure.generator.cli.ci import diff_command, goldens_command, verify_command
from backpressure.generator.cli.estimate import catalog_command, estimate_command
from backpressure.generator.cli.options import COMMAND_SETTINGS, environment_error, show_notes
from backpressure.generator.cli.plan import plan_command
from backpressure.generator.cli.simulate import simulate_command
from backpressure.generator.cli.sweep import sweep_command


# Every default shows in --help, and so in docs/cli.md, which is generated from it.
@click.group(context_settings=COMMAND_SETTINGS)
@click.version_option(package_name="backpressure")
def cli() -> None:
    """Honest LLM-serving capacity: slots, ceilings and breaking points."""
    show_notes()


cli.add_command(estimate_command)
cli.add_command(catalog_command)
cli.add_command(simulate_command)
cli.add_command(sweep_command)
cli.add_command(build_command)
cli.add_command(plan_command)
cli.add_command(verify_command)
cli.add_command(diff_command)
cli.add_command(goldens_command)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising SystemExit."""
    try:
        # Outside standalone mode click returns an Exit's code instead of raising it.
        code = cli.main(args=argv, prog_name="backpressure", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        # One clear line, not click's usage block: scripts and people read the same text.
        click.echo(f"backpressure: error: {exc.format_message()}", err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except CatalogError as exc:
        # Bad input a command did not turn into its own message: still one line each.
        for problem in exc.problems:
            click.echo(f"backpressure: error: {problem}", err=True)
        return 2
    except OSError as exc:  # the machine, not the input (a full or read-only disk): one line
        error = environment_error(exc)
        error.show()
        return error.exit_code
    return code if isinstance(code, int) else 0
