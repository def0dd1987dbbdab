"""What every command shares: the typer app, the console, logging, and error handling."""

from __future__ import annotations

import errno
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, TypeVar

import click
import typer
import typer.core
from rich.console import Console, ConsoleDimensions

from semsearch.cli.plain_params import convert_plainly
from semsearch.disk import disk_problem
from semsearch.errors import Interrupted, SemsearchError, as_interrupted
from semsearch.store.folders import DEFAULT_INDEX_DIR

# The order `semsearch --help` lists commands in: the order a user meets them.
COMMAND_ORDER = (
    "build",
    "query",
    "list",
    "info",
    "tune",
    "mine",
    "serve",
    "add",
    "delete",
    "reindex",
    "compact",
    "rollback",
    "verify",
    "train",
    "train-adapter",
    "eval",
    "bench",
)


class _FlagsAsFlags:
    """--help shows a flag as a flag (`--json`), not as an option that takes a `<bool>`
    (typer's rich help gives every option its type, flags too); plain options are converted
    without pydantic (`plain_params`)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        convert_plainly(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def get_params(self, ctx) -> list:  # typer's own (vendored) click types
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""  # shown in place of the type
        return params


class _Command(_FlagsAsFlags, typer.core.TyperCommand):
    pass


class _Group(_FlagsAsFlags, typer.core.TyperGroup):
    pass


class App(typer.Typer):
    """A typer app whose commands and command groups show their flags as flags."""

    def __init__(self, **options) -> None:
        super().__init__(**{"cls": _Group, **options})

    def command(self, *args, **options):
        return super().command(*args, **{"cls": _Command, **options})


class _CommandsInUseOrder(_Group):
    """Lists commands in COMMAND_ORDER (anything not named there after them) instead of in
    the order their modules happened to be imported."""

    def list_commands(self, ctx) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: number for number, name in enumerate(COMMAND_ORDER)}
        return sorted(names, key=lambda name: rank.get(name, len(rank)))


def _print_version(value: bool) -> None:
    if value:
        from semsearch import __version__

        typer.echo(f"semsearch {__version__}")
        raise typer.Exit()


app = App(
    help="Semantic search with a Sentence-BERT bi-encoder: build FAISS indexes over your texts and query them.",
    cls=_CommandsInUseOrder,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# How wide output into a pipe or a file may be: wider than any row a command prints.
PIPE_WIDTH = 100_000


class _UnwrappedWhenPiped(Console):
    """rich's console, as wide as the terminal it writes to; into a pipe or a file (no
    terminal, where rich assumes 80 columns) as wide as what it prints: a script reads one
    table row a line, and no cell broken across lines."""

    @property
    def size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)
        return size if self.is_terminal else ConsoleDimensions(PIPE_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)


console = _UnwrappedWhenPiped()


class _CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record arrives (test runners swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


DEBUG_ENV = "SEMSEARCH_DEBUG"
FAISS_LOADER_LOGGER = "faiss.loader"
_debug_flag = {"on": False}  # set by --debug for the command that runs next


@app.callback()
def configure_logging(
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Say more about each step.")
    ] = False,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only errors.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help=f"Show the full traceback of any error (or set {DEBUG_ENV}=1)."
        ),
    ] = False,
) -> None:
    """Semantic search with a Sentence-BERT bi-encoder: build FAISS indexes over your texts and query them."""
    _debug_flag["on"] = debug
    level = logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING
    handler = _CurrentStderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    if not verbose:
        logging.getLogger("faiss").setLevel(logging.WARNING)
    # FAISS tries its AVX512 and AVX2 builds first and logs each one missing as "Could not load
    # library ..." at INFO: under -v that reads like a failure, though the build it then loads works.
    logging.getLogger(FAISS_LOADER_LOGGER).setLevel(logging.WARNING)


Command = TypeVar("Command", bound=Callable)


def _raise_interrupted(signal_number: int, _frame) -> None:
    raise Interrupted(signal_number=signal_number)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (`docker stop`, Kubernetes, `kill`) raises `Interrupted` where the work is, as
    Ctrl-C raises KeyboardInterrupt: the same cleanup runs and a build keeps its parts, where
    the default ends the process without a word. Only the main thread hears signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def user_errors(command: Command) -> Command:
    """Print any failure as one line on stderr, with no traceback: a user's mistake
    (`SemsearchError`) exits 2, anything unexpected exits 1 and says how to see the
    traceback (--debug or SEMSEARCH_DEBUG=1, which re-raise instead). Ctrl-C and SIGTERM
    print what the work kept (or that it was interrupted) and exit 130 and 143."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            with sigterm_as_interrupt():
                return command(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise  # typer's own exits and usage errors
        except SemsearchError as exc:
            if debugging():
                raise
            typer.echo(f"error: {_one_line(exc, limit=None)}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt as exc:
            interrupted = as_interrupted(exc)
            typer.echo(str(interrupted), err=True)
            raise typer.Exit(interrupted.exit_code) from None
        except BrokenPipeError:  # `semsearch query ... | head`: the reader has all it wanted
            _silence_stdout()
            raise typer.Exit(141) from None  # what a shell reports for SIGPIPE
        except Exception as exc:
            if debugging():
                raise
            if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:  # any path option
                typer.echo(f"error: {_too_long(exc)}", err=True)
                raise typer.Exit(2) from None
            # A full disk or a read-only folder is the user's to fix, whichever writer met it.
            if (
                problem := disk_problem(exc, repr(_command_name(command).replace("_", "-")))
            ) is not None:
                typer.echo(f"error: {_one_line(problem, limit=None)}", err=True)
                raise typer.Exit(2) from None
            typer.echo(
                f"error: {_command_name(command)} failed unexpectedly with "
                f"{type(exc).__name__}: {_one_line(exc)} (run with --debug or {DEBUG_ENV}=1 for "
                "the full traceback)",
                err=True,
            )
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def _command_name(command: Callable) -> str:
    return command.__name__.replace("_command", "")


def _too_long(exc: OSError) -> str:
    """A path the system refused as too long, as a user's mistake: one line, the path cut."""
    from semsearch.store.folders import shorten_path

    where = f" {shorten_path(exc.filename)}" if exc.filename else ""
    return f"the path{where} is too long for this system ({exc.strerror}): use a shorter one"


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (a test runner)
        pass


def debugging() -> bool:
    """True when --debug or SEMSEARCH_DEBUG=1 asked for full tracebacks."""
    return _debug_flag["on"] or os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


def _one_line(exc: BaseException, limit: int | None = 400) -> str:
    """An exception's message on one line (FAISS and pyarrow write several), cut at `limit`."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip()) or "no message"
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def show_progress(json_output: bool = False) -> bool:
    """Progress bars unless `-q` asked for errors only, or JSON goes to a pipe without a terminal."""
    if logging.getLogger().getEffectiveLevel() > logging.WARNING:
        return False
    return sys.stderr.isatty() or not json_output


__all__ = ["App", "DEFAULT_INDEX_DIR", "app", "console", "user_errors"]
