"""The search page and the server's own state: /health, /ready and /metrics."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from semsearch.server.access import READER, ClientError, Registry, authorised
from semsearch.server.registry import IndexRegistry
from semsearch.server.warmup import Startup

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def page() -> str:
    return resources.files("semsearch.server").joinpath("page.html").read_text(encoding="utf-8")


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    """For a load balancer or a container check, with no key and no data: 503 "starting"
    until the model and indexes are loaded (503 "failed" if they could not be), then 200
    "alive" while the process answers. Whether every index is served is `/ready`'s answer."""
    startup: Startup[IndexRegistry] = request.app.state.startup
    if startup.result is None:
        status = "failed" if startup.failure is not None else "starting"
        return JSONResponse({"status": status}, status_code=503, headers={"Retry-After": "1"})
    return JSONResponse({"status": "alive"})


@router.get("/ready")
async def ready(request: Request) -> JSONResponse:
    """Readiness: 503 with "starting" (and what is loading) until the model and every
    index are open, then 200 "ok", or 503 "degraded" while an index cannot be served
    (its folder gone, or its files found damaged by a search).
    `warm` turns true once queries encode in their final precision (bf16 kernels are
    compiled in the background; fp32 answers meanwhile). With the key (or none set) the
    body also names each index's state."""
    startup: Startup[IndexRegistry] = request.app.state.startup
    indexes = startup.result
    if indexes is None:
        status = "failed" if startup.failure is not None else "starting"
        detail = startup.failure or startup.phase
        body = {"status": status, "detail": detail, "elapsed_s": round(startup.elapsed_s, 1)}
        return JSONResponse(body, status_code=503)
    ok = all(served.healthy for served in indexes.indexes.values())
    body = {
        "status": "ok" if ok else "degraded",
        "warm": indexes.warm,
        "precision": indexes.precision,
    }
    try:
        await authorised(request)
    except ClientError:
        pass  # without the key: the status only
    else:
        body["indexes"] = {
            name: {
                "healthy": served.healthy,
                "problem": served.problem,
                "generation": None if served.searcher is None else served.searcher.generation,
            }
            for name, served in indexes.indexes.items()
        }
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/metrics", dependencies=READER)
def prometheus(indexes: Registry, request: Request) -> Response:
    metrics = request.app.state.metrics
    for name, served in indexes.indexes.items():
        metrics.healthy.labels(name).set(1 if served.healthy else 0)
        if served.searcher is not None:
            metrics.generation.labels(name).set(served.searcher.generation)
            metrics.rows.labels(name).set(served.searcher.manifest.rows)
    return Response(metrics.render(), media_type=metrics.content_type)
