"""Helpers shared by the command-line tests: one `CliRunner` and the one-line error check."""

from __future__ import annotations

from click.testing import Result
from typer.testing import CliRunner

runner = CliRunner()


def error_line(result: Result) -> str:
    """The one `error: ` line of a command refused for bad input: exit code 2, no traceback."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]
