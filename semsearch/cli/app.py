"""`semsearch` commands. Each parses its options, calls the library, and formats the result.

Every command lives in a module of its own and registers itself on the shared app. `main`
imports only the module of the command it runs (typer reads the signature of every command
it holds, about 0.1 s for all of them, and the modules' imports cost more again);
`from semsearch.cli.app import app` gives the app with every command.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, NoReturn

# Which module registers each top-level command (tests/cli/test_app.py keeps it complete).
COMMAND_MODULES = {
    "add": "change_commands",
    "bench": "bench_command",
    "build": "index_commands",
    "compact": "change_commands",
    "delete": "change_commands",
    "devices": "devices_command",
    "eval": "eval_command",
    "info": "index_commands",
    "interpolate": "interpolate_command",
    "list": "index_commands",
    "mine": "mine_command",
    "query": "query_command",
    "reindex": "change_commands",
    "rollback": "change_commands",
    "serve": "serve_command",
    "train": "train_command",
    "train-adapter": "train_adapter_command",
    "tune": "tune_command",
    "verify": "verify_command",
    "word-model": "word_commands",
    "word-vectors": "word_commands",
}

# Commands that answer queries one at a time: their OpenMP threads (FAISS's) sleep when idle
# rather than spin, since a spinning thread takes a core from the encoder's next query
# (OpenVINO's own threads); `VectorIndex` then shares a lone query's lists among them.
QUERY_COMMANDS = {"query", "serve"}

__all__ = ["COMMAND_MODULES", "app", "leave", "main"]  # noqa: F822 (`app` comes from __getattr__)


def register(modules: list[str]) -> Any:
    """The shared typer app, once the command modules `modules` have registered on it."""
    for module in modules:
        importlib.import_module(f"semsearch.cli.{module}")
    from semsearch.cli.common import app

    return app


def register_all() -> Any:
    """The app with every command (for --help, a mistyped command, and importers)."""
    return register(sorted(set(COMMAND_MODULES.values())))


def command_named(args: list[str]) -> str | None:
    """The command `args` run: the first word that is not an option (the app's own options
    take no values), or None."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def __getattr__(name: str) -> Any:
    if name == "app":
        return register_all()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    command = command_named(sys.argv[1:]) or ""
    if command in QUERY_COMMANDS:  # read by OpenMP when FAISS loads: before any import of it
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    module = COMMAND_MODULES.get(command)
    app = register([module]) if module else register_all()
    if command not in LEAVE_AT_ONCE:
        app()
        return
    try:
        app()
    except SystemExit as done:
        leave(done.code)
    leave(0)


# Commands that leave without the interpreter's teardown once they have answered: a query
# writes nothing it has not finished (each cache file renamed into place) before it prints,
# and OpenVINO, FAISS, pyarrow and numpy freeing their objects and libraries at exit took
# 0.13 s of a 0.6 s cold query on 2 cores.
LEAVE_AT_ONCE = {"query"}


def leave(code: object) -> NoReturn:
    """End the process as `sys.exit(code)` would, less the teardown: the logs and the
    standard streams are flushed, then `os._exit`. Threads are not waited for: a finished
    query's are idle pool workers (which only Python's own exit can wake, so joining them
    would hang), or the export's compile after a query that failed first, whose half-written
    blob has no hash record and is deleted by the next start."""
    import logging

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # as Python exits on a message: the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # `| head`: the reader had all it wanted
            pass
        except (OSError, ValueError):  # a full disk, a closed stream: as Python ends then
            status = status or 120
    os._exit(status)
