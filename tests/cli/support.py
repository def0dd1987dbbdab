"""Helpers shared by the command-line tests: one `CliRunner` and the one-line error check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from unittest import mock

import typer
import typer.testing
from click.testing import Result


def _shape(app: typer.Typer) -> tuple:
    """What typer builds an app's click command from: its commands and groups, each named
    with its function (a command registered or replaced later changes it)."""
    commands = tuple((info.name, id(info.callback)) for info in app.registered_commands)
    groups = tuple(
        (info.name, id(info.typer_instance), _shape(info.typer_instance))
        for info in app.registered_groups
    )
    return (id(app), id(app.registered_callback), commands, groups)


class CliRunner(typer.testing.CliRunner):
    """typer's test runner, with each app's click command built once: typer rebuilds it from
    the signature of every command on each call (25 ms; the suite makes hundreds of calls)."""

    _commands: dict[tuple, tuple[typer.Typer, Any]] = {}

    def invoke(self, app: typer.Typer, args: str | Sequence[str] | None = None, **kwargs) -> Result:
        key = _shape(app)
        if key not in self._commands:  # the app is kept with it, so its id is not reused
            self._commands[key] = (app, typer.main.get_command(app))
        command = self._commands[key][1]
        with mock.patch.object(typer.testing, "_get_command", lambda _app: command):
            return super().invoke(app, args, **kwargs)


runner = CliRunner()


def error_line(result: Result) -> str:
    """The one `error: ` line of a command refused for bad input: exit code 2, no traceback."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]
