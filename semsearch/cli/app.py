"""`semsearch` commands. Each parses its options, calls the library, and formats the result.

Every command lives in a module of its own and registers itself on the shared app.
"""

from __future__ import annotations

from semsearch.cli import (  # noqa: F401  (importing a command module registers it)
    bench_command,
    change_commands,
    devices_command,
    eval_command,
    index_commands,
    interpolate_command,
    mine_command,
    query_command,
    serve_command,
    train_command,
    tune_command,
    verify_command,
    word_commands,
)
from semsearch.cli.common import app

__all__ = ["app", "main"]


def main() -> None:
    app()
