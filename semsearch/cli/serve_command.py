"""`semsearch serve`: the HTTP API and search page over the indexes in a folder."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Annotated

import typer

from semsearch.cli.common import DEFAULT_INDEX_DIR, app, user_errors
from semsearch.cli.options import Device, IndexDir
from semsearch.errors import SemsearchError
from semsearch.options import QUERY_PRECISIONS

if TYPE_CHECKING:
    from semsearch.server.schemas import ServerConfig


ServedNames = Annotated[
    list[str] | None,
    typer.Argument(
        help="Indexes to serve (or --index NAME, repeated; default: every index in --index-dir)."
    ),
]
ServedIndexes = Annotated[
    list[str] | None,
    typer.Option(
        "--index",
        help="An index to serve (repeatable; the same as the arguments).",
        show_default=False,
    ),
]
Host = Annotated[
    str, typer.Option(help="Address to bind; 0.0.0.0 exposes the server to the network.")
]
Port = Annotated[int, typer.Option(help="TCP port.")]
ApiKey = Annotated[
    str | None,
    typer.Option(
        help="Required on every request when set, and what turns the write "
        "endpoints on (default: $SEMSEARCH_API_KEY)."
    ),
]
MaxBatch = Annotated[
    int,
    typer.Option(
        help="Most queries one encoder worker takes at a time (on a CPU, more than 8 are encoded 8 at a time, shortest first); small batches answer in arrival order."
    ),
]
MaxWaitMs = Annotated[
    float, typer.Option(help="How long the first query of a batch waits for others.")
]
QueryPrecision = Annotated[
    str,
    typer.Option(
        help="Query encoding on a CPU: auto (bf16 where this CPU runs it natively and faster, "
        "measured at start-up), fp32 or bf16."
    ),
]


@app.command()
@user_errors
def serve(
    names: ServedNames = None,
    index: ServedIndexes = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    host: Host = "127.0.0.1",
    port: Port = 8000,
    api_key: ApiKey = None,
    max_batch: MaxBatch = 8,
    max_wait_ms: MaxWaitMs = 3.0,
    device: Device = "auto",
    precision: QueryPrecision = "auto",
) -> None:
    """Serve indexes over HTTP: a JSON API (docs at /docs), Prometheus /metrics and a search page at /.

    Queries arriving together are encoded in one batch; changes made through the API or by
    `semsearch add`/`delete` in another process are answered from within a second.
    """
    from semsearch.server.registry import served_folders

    names = _served_names(names, index)
    # Checked before uvicorn starts, so that a wrong name or an empty folder is one line,
    # not a failed application start-up with uvicorn's traceback.
    served_folders(index_dir, list(names or []))
    if precision not in QUERY_PRECISIONS:
        raise SemsearchError(
            f"unknown --precision {precision!r}: use {', '.join(QUERY_PRECISIONS)}"
        )
    from semsearch.server.schemas import ServerConfig

    config = ServerConfig(
        index_dir=index_dir,
        names=list(names or []),
        device=device,
        api_key=api_key or os.environ.get("SEMSEARCH_API_KEY") or None,
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        precision=precision,
    )
    _run(config, host, port)


def _served_names(arguments: list[str] | None, options: list[str] | None) -> list[str]:
    """The indexes to serve, named as arguments or with --index (either way, or both alike)."""
    if arguments and options and sorted(arguments) != sorted(options):
        raise SemsearchError(
            f"two lists of indexes: {' '.join(arguments)} (the arguments) and "
            f"--index {' --index '.join(options)}: give one"
        )
    return list(options or arguments or [])


def _run(config: ServerConfig, host: str, port: int) -> None:
    """Run the server until Ctrl-C; a start that failed ends the command with its one line."""
    import uvicorn

    from semsearch.server.app import create_app

    # What start-up is loading and warming, and when it is ready, in a line each: an
    # operator otherwise sees a URL that answers 503 for a while without knowing why.
    if logging.getLogger().getEffectiveLevel() <= logging.WARNING:
        logging.getLogger("semsearch.server").setLevel(logging.INFO)
    typer.echo(
        f"semsearch: http://{host}:{port}/ (API docs at /docs; /ready says when the "
        "indexes are loaded); Ctrl-C stops",
        err=True,
    )
    api = create_app(config)
    server = uvicorn.Server(
        uvicorn.Config(api, host=host, port=port, log_level="warning", timeout_graceful_shutdown=30)
    )
    # The indexes load in the background: a start that fails stops the server, and the
    # command ends with that one line (a process that never becomes ready helps nobody).
    api.state.on_failed_start = lambda: setattr(server, "should_exit", True)
    server.run()
    failure = getattr(getattr(api.state, "startup", None), "failure", None)
    if failure is not None:
        raise SemsearchError(f"the server could not start: {failure}")
