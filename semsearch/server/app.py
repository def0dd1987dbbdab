"""The HTTP API and search page: `create_app(ServerConfig(...))` gives a FastAPI app.

The model and indexes load in a thread the lifespan starts, so the server listens at once
(`/health` and `/ready` answer 503 "starting" until every index is open). Every error is a
JSON body `{"error": ...}`: 4xx for what the client can fix, 503 for an index whose files
are damaged (then unhealthy in /ready), 500 with a request id (logged) for the rest.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline

from semsearch import __version__
from semsearch.errors import DamagedIndexError, NoSpaceError, NotWritableError, SemsearchError
from semsearch.server.access import ClientError, api_words, error_response
from semsearch.server.guard import RequestGuard
from semsearch.server.metrics import ServerMetrics
from semsearch.server.registry import IndexRegistry
from semsearch.server.routes import indexes, search, status
from semsearch.server.schemas import ServerConfig
from semsearch.server.warmup import Startup

log = logging.getLogger(__name__)

DOCS_ASSETS = "/docs-assets"  # Swagger UI's and ReDoc's files, from the package


def create_app(config: ServerConfig) -> FastAPI:
    """The API over the indexes `config` names (every index in its folder by default)."""
    metrics = ServerMetrics()

    def load(startup: Startup[IndexRegistry]) -> IndexRegistry:
        def on_phase(phase: str) -> None:
            startup.phase = phase
            log.info("starting: %s", phase)

        try:
            registry = IndexRegistry(config, metrics.batch_size.observe, on_phase=on_phase)
        except Exception:
            stop = getattr(app.state, "on_failed_start", None)  # `serve` stops the process
            if stop is not None:
                stop()
            raise
        registry.start_refreshing(config.refresh_every_s)
        log.info(
            "ready in %.1f s: serving %s; warmed %s; queries encode in %s",
            startup.elapsed_s,
            ", ".join(registry.indexes),
            ", ".join(registry.warmed),
            registry.precision,
        )
        return registry

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.startup = Startup(load, log_failure=not hasattr(app.state, "on_failed_start"))
        try:
            yield
        finally:
            registry = await run_in_threadpool(app.state.startup.wait)
            if registry is not None:
                registry.close()

    # /docs (Swagger UI) and /redoc with their scripts and styles served from the
    # fastapi-offline package, not a CDN: they work on a machine without the internet.
    app = FastAPIOffline(
        title="semsearch",
        version=__version__,
        lifespan=lifespan,
        static_url=DOCS_ASSETS,
        description="Semantic search over FAISS indexes built by `semsearch build`.",
    )
    app.state.config, app.state.metrics = config, metrics
    _add_error_handling(app, config, metrics)
    for router in (status.router, search.router, indexes.router):
        app.include_router(router)
    return app


def _add_error_handling(app: FastAPI, config: ServerConfig, metrics: ServerMetrics) -> None:
    app.add_middleware(RequestGuard, max_body_bytes=config.limits.max_body_bytes, metrics=metrics)

    # Each error the routes let through, as the JSON error body with its status.
    answers = {
        ClientError: lambda exc: (exc.status, str(exc)),
        SemsearchError: lambda exc: (400, api_words(str(exc))),
        DamagedIndexError: lambda exc: (503, str(exc)),  # the index's owner must act
        NoSpaceError: lambda exc: (507, str(exc)),  # the server's disk is full: its owner's
        NotWritableError: lambda exc: (403, str(exc)),  # served read-only: read, not changed
        LookupError: lambda exc: (404, str(exc.args[0] if exc.args else exc)),
        HTTPException: lambda exc: (exc.status_code, str(exc.detail)),
        RequestValidationError: lambda exc: (422, _first_problem(exc)),
    }
    for kind, answer in answers.items():

        async def handler(request: Request, exc: Exception, answer=answer) -> JSONResponse:
            response = error_response(*answer(exc))
            if isinstance(exc, ClientError):
                response.headers.update(exc.headers or {})
            return response

        app.add_exception_handler(kind, handler)


def _first_problem(exc: RequestValidationError) -> str:
    """A request's first invalid field and why, in one line."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    return f"{where}: {first.get('msg', 'invalid')}" if where else first.get("msg", "invalid")
