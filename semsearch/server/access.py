"""What every route shares: the served indexes as a dependency, the API key's checks, the
client's errors and the JSON error body.

Why a module of its own: the routers (`routes/`) and the app (`app.py`) both need these,
and the routers must not import the app that includes them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from semsearch.errors import DamagedIndexError
from semsearch.server.registry import IndexRegistry, ServedIndex
from semsearch.server.schemas import ServerConfig
from semsearch.server.warmup import Startup


class ClientError(Exception):
    """A request the client must change (or retry): answered with `status` and the message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


async def registry(request: Request) -> IndexRegistry:
    """The served indexes, or a 503 while they are still loading (or failed to)."""
    startup: Startup[IndexRegistry] = request.app.state.startup
    if startup.result is not None:
        return startup.result
    if startup.failure is not None:
        raise ClientError(503, f"the server could not start: {startup.failure}")
    raise ClientError(
        503,
        f"starting: {startup.phase} ({startup.elapsed_s:.0f} s so far)",
        headers={"Retry-After": "1"},
    )


# Route functions are read by FastAPI from their annotations, which resolve at module level.
Registry = Annotated[IndexRegistry, Depends(registry)]


def server_config(request: Request) -> ServerConfig:
    return request.app.state.config


# Dependencies are `async`: FastAPI runs a plain `def` one in its thread pool, a thread hop
# per request for a few microseconds of work.
async def authorised(request: Request) -> None:
    """With an API key set, every endpoint but the page wants it (Bearer or X-API-Key)."""
    key = server_config(request).api_key
    if key is None:
        return
    given = request.headers.get("x-api-key") or request.headers.get(
        "authorization", ""
    ).removeprefix("Bearer ")
    if not secrets.compare_digest(given.encode(), key.encode()):
        raise ClientError(
            401,
            "missing or wrong API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
        )


async def may_write(request: Request) -> None:
    if server_config(request).api_key is None:
        raise ClientError(
            403,
            "writes are off: start the server with --api-key (or SEMSEARCH_API_KEY) to allow them",
        )
    await authorised(request)


READER, WRITER = [Depends(authorised)], [Depends(may_write)]


def healthy(indexes: IndexRegistry, name: str | None) -> ServedIndex:
    """The index `name` (the only one when None), or a 503 when it cannot be served."""
    served = indexes.get(name)
    if not served.healthy:
        raise ClientError(503, f"index {served.name!r} is unavailable: {served.problem}")
    return served


@contextmanager
def damage_reported(indexes: IndexRegistry, served: ServedIndex, generation: int) -> Iterator[None]:
    """A `DamagedIndexError` met while serving `served` (at `generation`) marks it unhealthy,
    for /ready and the requests after this one, before it is answered with a 503."""
    try:
        yield
    except DamagedIndexError as exc:
        indexes.mark_damaged(served, generation, str(exc))
        raise


# The library's messages name the command line's flags; over HTTP the same things are the
# request's fields (`--where EXPR` is `where`).
_FLAGS = re.compile(
    r"(?<![\w-])--(where|ids|ef-search|nprobe|oversample|mode|fusion|alpha)(?: (?:EXPR|FILE))?\b"
)


def api_words(message: str) -> str:
    """`message` with the CLI's flags named as the API's fields."""
    return _FLAGS.sub(lambda match: match.group(1).replace("-", "_"), message)


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
