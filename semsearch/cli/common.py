"""What every command shares: the typer app, the console, option types, and error handling."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from semsearch.errors import SemsearchError
from semsearch.index.store import DEFAULT_INDEX_DIR

app = typer.Typer(
    help="Semantic search with a Sentence-BERT bi-encoder: build FAISS indexes over your texts and query them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()


class _CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record arrives (test runners swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


@app.callback()
def configure_logging(
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Say more about each step.")] = False,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only errors.")] = False,
) -> None:
    """Semantic search with a Sentence-BERT bi-encoder: build FAISS indexes over your texts and query them."""
    level = logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING
    handler = _CurrentStderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    if not verbose:
        logging.getLogger("faiss").setLevel(logging.WARNING)
Command = TypeVar("Command", bound=Callable)

IndexDir = Annotated[
    Path, typer.Option("--out-dir", "--index-dir", help="Folder that holds the index folders.")
]
Device = Annotated[str, typer.Option(help="auto (CUDA when present), cpu, cuda or cuda:N.")]
EncodeBatch = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        help="Texts per forward pass. Default: 64 on CPU; 256 on a GPU, with batches of long "
        "texts capped at 65,536 tokens.",
        show_default=False,
    ),
]
Quantize = Annotated[
    str | None,
    typer.Option(
        help="int8: quantise the model's linear layers for CPU inference (faster, vectors "
        "change slightly; off unless asked)."
    ),
]


def user_errors(command: Command) -> Command:
    """Print a user's mistake as one line on stderr and exit 2, with no traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except SemsearchError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (lines) for scripts.")]
__all__ = ["DEFAULT_INDEX_DIR", "Device", "IndexDir", "JsonFlag", "Quantize", "app", "console",
           "user_errors"]  # fmt: skip
