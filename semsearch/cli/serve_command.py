"""`semsearch serve`: the HTTP API and search page over the indexes in a folder."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer

from semsearch.cli.common import DEFAULT_INDEX_DIR, app, user_errors
from semsearch.cli.options import Device, IndexDir
from semsearch.errors import Interrupted, SemsearchError
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
RecallSample = Annotated[
    float,
    typer.Option(
        help="Share of dense queries whose recall@10 is measured against exact search in "
        "spare time, reported in /metrics and GET /indexes/NAME (0: off).",
    ),
]
RecallCpu = Annotated[
    float,
    typer.Option(help="Most of one core the recall monitor may use (0.05: 5 %)."),
]
RecallTarget = Annotated[
    float | None,
    typer.Option(
        help="Warn when the live recall@10 falls below this beyond its 95 % interval "
        "(default: the target each index was tuned to)."
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
    recall_sample: RecallSample = 0.01,
    recall_cpu: RecallCpu = 0.05,
    recall_target: RecallTarget = None,
) -> None:
    """Serve indexes over HTTP: a JSON API (docs at /docs), Prometheus /metrics and a search page at /.

    Queries arriving together are encoded in one batch; changes made through the API or by
    `semsearch add`/`delete` in another process are answered from within a second.
    """
    from semsearch.server.recall_monitor import MonitorSettings
    from semsearch.server.registry import served_folders

    recall = MonitorSettings(sample_rate=recall_sample, cpu_share=recall_cpu, target=recall_target)
    recall.check()
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
        recall=recall,
    )
    _run(config, host, port)


# From SIGTERM to exit, at most: the requests in flight get GRACE_S to be answered, then
# the background work stops and a change through the API gets what is left to finish.
STOP_BOUND_S = 10.0
GRACE_S = 7.0


def _served_names(arguments: list[str] | None, options: list[str] | None) -> list[str]:
    """The indexes to serve, named as arguments or with --index (either way, or both alike)."""
    if arguments and options and sorted(arguments) != sorted(options):
        raise SemsearchError(
            f"two lists of indexes: {' '.join(arguments)} (the arguments) and "
            f"--index {' --index '.join(options)}: give one"
        )
    return list(options or arguments or [])


def _run(config: ServerConfig, host: str, port: int) -> None:
    """Run the server until Ctrl-C or SIGTERM; a start that failed ends the command with its
    one line. SIGTERM (`docker stop`, Kubernetes) drains: no new connections, the requests
    in flight answered, queued queries encoded, background work stopped, exit 0 within
    STOP_BOUND_S."""
    import uvicorn

    from semsearch.server.app import create_app

    class DrainingServer(uvicorn.Server):
        """uvicorn's server, remembering when it was asked to stop."""

        stop_asked: float | None = None

        def handle_exit(self, sig: int, frame) -> None:
            self.stop_asked = self.stop_asked or time.monotonic()
            super().handle_exit(sig, frame)

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
    server = DrainingServer(
        uvicorn.Config(
            api, host=host, port=port, log_level="warning", timeout_graceful_shutdown=GRACE_S
        )
    )
    # The indexes load in the background: a start that fails stops the server, and the
    # command ends with that one line (a process that never becomes ready helps nobody).
    api.state.on_failed_start = lambda: setattr(server, "should_exit", True)
    try:
        server.run()
    except Interrupted as exc:  # uvicorn drained, then raised the signal again
        if exc.signal_number != signal.SIGTERM:
            raise  # Ctrl-C: "interrupted", 130, as every command
        _finish_writes(api, server.stop_asked or time.monotonic())
        typer.echo("semsearch: stopped by SIGTERM after answering the requests in flight", err=True)
        return
    failure = getattr(getattr(api.state, "startup", None), "failure", None)
    if failure is not None:
        raise SemsearchError(f"the server could not start: {failure}")


def _finish_writes(api, stop_asked: float) -> None:
    """Give a change through the API that outlived the grace period what is left of
    STOP_BOUND_S; past it, end the process: the change leaves the index as it was (its
    generation is written last), and the next writer removes its files."""
    startup = getattr(api.state, "startup", None)
    registry = startup.result if startup is not None else None
    left_s = STOP_BOUND_S - 0.5 - (time.monotonic() - stop_asked)
    if registry is None or registry.wait_for_writes(left_s):
        return
    typer.echo(
        f"semsearch: stopped by SIGTERM; a change in progress did not finish within "
        f"{STOP_BOUND_S:.0f} s and was abandoned: its index stays at its last generation",
        err=True,
    )
    sys.stderr.flush()
    os._exit(0)  # the change's thread would otherwise hold the process open
