"""What every request passes through: an id, a body limit, timing, and a 500 that names it.

A plain ASGI middleware rather than Starlette's `@app.middleware("http")`: that one runs
each request in a task of its own and copies the response through a stream, a cost the
search endpoint paid on every query for nothing it needed.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import orjson
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from semsearch.server.metrics import ServerMetrics

log = logging.getLogger(__name__)

# Requests that may carry a body without saying its length up front (chunked).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def json_bytes(value: Any) -> bytes:
    """`value` as JSON: NumPy values as numbers, dates as ISO text, NaN as null, the rest as str."""
    return orjson.dumps(
        value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS, default=str
    )


class RequestGuard:
    """Gives each HTTP request an id (`X-Request-ID`), refuses bodies over `max_body_bytes`
    with a 413, records its route, status and time, and answers any failure nothing else
    handled with a 500 that names the id (logged with the traceback)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, metrics: ServerMetrics) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex[:12]
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status, responded = 500, False

        async def send_with_id(message: Message) -> None:
            nonlocal status, responded
            if message["type"] == "http.response.start":
                status, responded = message["status"], True
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        (b"x-request-id", request_id.encode()),
                    ],
                }
            await send(message)

        try:
            limited = await self._limited(scope, receive)
            if limited is None:
                message = f"the request body is over {self.max_body_bytes} bytes"
                await JSONResponse({"error": message}, 413)(scope, receive, send_with_id)
            else:
                await self.app(scope, limited, send_with_id)
        except Exception:
            log.exception("request %s failed", request_id)
            if not responded:
                message = f"internal error (request id {request_id})"
                await JSONResponse({"error": message}, 500)(scope, receive, send_with_id)
        finally:
            route = scope.get("route")
            self.metrics.observe(
                getattr(route, "path", "unmatched"), status, time.perf_counter() - started
            )

    async def _limited(self, scope: Scope, receive: Receive) -> Receive | None:
        """`receive`, or None when the body is over the limit. A declared length is checked
        as is; a body without one is read here, up to the limit, and replayed."""
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None:
            fits = length.isdigit() and int(length) <= self.max_body_bytes
            return receive if fits else None
        if scope.get("method") not in BODY_METHODS:
            return receive
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                return None
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        replay = iter(messages)

        async def replayed() -> Message:
            return next(replay, None) or await receive()

        return replayed
