"""The HTTP API and search page: `create_app(ServerConfig(...))` gives a FastAPI app.

The model and indexes load once, in a thread the app's lifespan starts: the server listens
at once, `/health` (no key, no data) and `/ready` answer 503 "starting" until every index
is open, then 200 (server/warmup.py: queries are answered in fp32 while
bf16 kernels compile between batches).
Queries are encoded by the registry's micro-batchers (a worker thread) and searched in
the thread pool, so the event loop never waits on the model or on FAISS. Every error is a
JSON body `{"error": ...}`: 4xx for what the client can fix, 503 for an index whose files
are damaged (the index is then unhealthy in /ready, with the reason), 500 with a request id
(logged with its traceback) for the rest.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from importlib import resources
from typing import Annotated

import numpy as np
import pyarrow as pa
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ValidationError

from semsearch import __version__
from semsearch.errors import DamagedIndexError, SemsearchError
from semsearch.hybrid import Fusion
from semsearch.index.living import Index
from semsearch.index.own_vectors import no_model_message, query_vectors
from semsearch.server.guard import RequestGuard, json_bytes
from semsearch.server.metrics import ServerMetrics
from semsearch.server.registry import IndexRegistry, ServedIndex
from semsearch.server.schemas import DeleteRequest, DocumentsRequest, SearchRequest, ServerConfig
from semsearch.server.warmup import Startup

log = logging.getLogger(__name__)

DOCS_ASSETS = "/docs-assets"  # Swagger UI's and ReDoc's files, from the package


class ClientError(Exception):
    """A request the client must change (or retry): answered with `status` and the message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


async def _registry(request: Request) -> IndexRegistry:
    """The served indexes, or a 503 while they are still loading (or failed to)."""
    startup: Startup[IndexRegistry] = request.app.state.startup
    if startup.result is not None:
        return startup.result
    if startup.failure is not None:
        raise ClientError(503, f"the server could not start: {startup.failure}")
    raise ClientError(503, f"starting: {startup.phase} ({startup.elapsed_s:.0f} s so far)",
                      headers={"Retry-After": "1"})  # fmt: skip


# Route functions are read by FastAPI from their annotations, which resolve at module level.
Registry = Annotated[IndexRegistry, Depends(_registry)]


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
        log.info("ready in %.1f s: serving %s; warmed %s; queries encode in %s",
                 startup.elapsed_s, ", ".join(registry.indexes), ", ".join(registry.warmed),
                 registry.precision)  # fmt: skip
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
    app = FastAPIOffline(title="semsearch", version=__version__, lifespan=lifespan,
                         static_url=DOCS_ASSETS,
                         description="Semantic search over FAISS indexes built by `semsearch build`.")  # fmt: skip
    app.state.config, app.state.metrics = config, metrics
    _add_error_handling(app, config, metrics)
    _add_routes(app, config, metrics)
    return app


def _add_error_handling(app: FastAPI, config: ServerConfig, metrics: ServerMetrics) -> None:
    app.add_middleware(RequestGuard, max_body_bytes=config.limits.max_body_bytes, metrics=metrics)

    @app.exception_handler(ClientError)
    async def client_error(request: Request, exc: ClientError) -> JSONResponse:
        response = _error(exc.status, str(exc))
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(SemsearchError)
    async def user_error(request: Request, exc: SemsearchError) -> JSONResponse:
        return _error(400, api_words(str(exc)))

    @app.exception_handler(DamagedIndexError)
    async def damaged_index(request: Request, exc: DamagedIndexError) -> JSONResponse:
        return _error(503, str(exc))  # the index's owner must act, not the client

    @app.exception_handler(LookupError)
    async def not_found(request: Request, exc: LookupError) -> JSONResponse:
        return _error(404, str(exc.args[0] if exc.args else exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        return _error(
            422, f"{where}: {first.get('msg', 'invalid')}" if where else first.get("msg", "invalid")
        )


def _add_routes(app: FastAPI, config: ServerConfig, metrics: ServerMetrics) -> None:
    limits = config.limits

    # Dependencies are `async`: FastAPI runs a plain `def` one in its thread pool, a thread
    # hop per request for a few microseconds of work.
    async def authorised(request: Request) -> None:
        """With an API key set, every endpoint but the page wants it (Bearer or X-API-Key)."""
        if config.api_key is None:
            return
        given = request.headers.get("x-api-key") or request.headers.get(
            "authorization", ""
        ).removeprefix("Bearer ")
        if not secrets.compare_digest(given.encode(), config.api_key.encode()):
            raise ClientError(
                401,
                "missing or wrong API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
            )

    async def may_write(request: Request) -> None:
        if config.api_key is None:
            raise ClientError(
                403,
                "writes are off: start the server with --api-key (or SEMSEARCH_API_KEY) to allow them",
            )
        await authorised(request)

    reader, writer = [Depends(authorised)], [Depends(may_write)]

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> str:
        return resources.files("semsearch.server").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        """For a load balancer or a container check, with no key and no data: 503 "starting"
        until the model and indexes are loaded (503 "failed" if they could not be), then 200
        "alive" while the process answers. Whether every index is served is `/ready`'s answer."""
        startup: Startup[IndexRegistry] = request.app.state.startup
        if startup.result is None:
            status = "failed" if startup.failure is not None else "starting"
            return JSONResponse({"status": status}, status_code=503, headers={"Retry-After": "1"})
        return JSONResponse({"status": "alive"})

    @app.get("/ready")
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
            return JSONResponse({"status": status, "detail": detail,
                                 "elapsed_s": round(startup.elapsed_s, 1)}, status_code=503)  # fmt: skip
        ok = all(served.healthy for served in indexes.indexes.values())
        body: dict = {"status": "ok" if ok else "degraded", "warm": indexes.warm,
                      "precision": indexes.precision}  # fmt: skip
        try:
            await authorised(request)
        except ClientError:
            pass  # without the key: the status only
        else:
            body["indexes"] = {name: {"healthy": s.healthy, "problem": s.problem, "generation": _generation(s)}
                               for name, s in indexes.indexes.items()}  # fmt: skip
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics", dependencies=reader)
    def prometheus(indexes: Registry) -> Response:
        for name, served in indexes.indexes.items():
            metrics.healthy.labels(name).set(1 if served.healthy else 0)
            if served.searcher is not None:
                metrics.generation.labels(name).set(served.searcher.generation)
                metrics.rows.labels(name).set(served.searcher.manifest.rows)
        return Response(metrics.render(), media_type=metrics.content_type)

    # GET /search reads its parameters itself, with one validation of the same model POST
    # takes: FastAPI solving ten query parameters one by one cost about 85 microseconds a
    # request of Python (holding the GIL the encoder threads also want), a third of that.
    @app.get(
        "/search",
        openapi_extra={
            "parameters": _query_parameters(
                SearchRequest, skip={"queries", "vector", "vectors"}, required={"q"}
            )
        },
    )
    async def search_get(request: Request) -> Response:
        """One query, in the URL: the parameters are POST /search's, `queries` aside."""
        await authorised(request)
        indexes = await _registry(request)
        given = {name: value for name, value in request.query_params.items() if name in GET_FIELDS}
        if "q" not in given:
            raise ClientError(422, "q: the query is missing: add ?q=... to the URL")
        try:
            search = SearchRequest.model_validate(given)
        except ValidationError as exc:  # answered like FastAPI's own parameter errors
            raise RequestValidationError(
                [{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]
            ) from None
        return await _search(indexes, search)

    @app.post("/search", dependencies=reader)
    async def search_post(indexes: Registry, request: SearchRequest) -> Response:
        return await _search(indexes, request)

    async def _search(indexes: IndexRegistry, request: SearchRequest) -> Response:
        if request.vector is not None or request.vectors is not None:
            return await _search_by_vector(indexes, request)
        queries = _queries(request)
        served = _healthy(indexes, request.index)
        searcher = served.searcher  # one generation for the whole request
        fusion = Fusion(
            request.fusion, **({"alpha": request.alpha} if request.alpha is not None else {})
        )
        if request.mode != "dense":
            searcher.snapshot.check_lexical()  # refused before anything is encoded

        def answer(vectors: np.ndarray | None) -> bytes:
            """Search and render (on the encoder's worker thread, right after encoding)."""
            results = searcher.search_vectors(vectors, request.k, request.where, queries=queries, mode=request.mode,
                                              fusion=fusion, nprobe=request.nprobe, efSearch=request.ef_search,
                                              oversample=request.oversample)  # fmt: skip
            return _answer(served, searcher, request.mode, queries, results)

        with _damage_reported(indexes, served, searcher.generation):
            if request.mode == "lexical":  # BM25 needs no vectors: no encoder, no batch
                body = await run_in_threadpool(answer, None)
            elif served.batcher is None:  # your own vectors and no model: nothing encodes texts
                raise SemsearchError(no_model_message(served.name, '"vector": [...]'))
            else:
                body = await asyncio.wrap_future(served.batcher.submit(queries, then=answer))
        return Response(body, media_type="application/json")

    async def _search_by_vector(indexes: IndexRegistry, request: SearchRequest) -> Response:
        """`vector` or `vectors`: searched as they are (dense only), no encoder involved."""
        if request.q is not None or request.queries is not None:
            raise ClientError(422, "give either texts (q, queries) or vectors (vector, vectors)")
        if (request.vector is None) == (request.vectors is None):
            raise ClientError(422, "give either vector (one) or vectors (a list), not both")
        if request.mode != "dense":
            raise ClientError(422, f"mode {request.mode} searches texts: send q or queries")
        given = [request.vector] if request.vector is not None else request.vectors or []
        if not given or len(given) > limits.max_queries:
            raise ClientError(
                422, f"send 1 to {limits.max_queries} vectors per request, not {len(given)}"
            )
        if request.k > limits.max_k:
            raise ClientError(422, f"k is {request.k}; the limit is {limits.max_k}")
        served = indexes.get(request.index)
        if not served.healthy:
            raise ClientError(503, f"index {served.name!r} is unavailable: {served.problem}")
        searcher = served.searcher  # one generation for the whole request
        vectors = query_vectors(given, searcher.manifest.model.dimension)

        def answer() -> bytes:
            results = searcher.search_vectors(vectors, request.k, request.where,
                                              nprobe=request.nprobe, efSearch=request.ef_search,
                                              oversample=request.oversample)  # fmt: skip
            return _answer(served, searcher, "dense", None, results)

        with _damage_reported(indexes, served, searcher.generation):
            body = await run_in_threadpool(answer)
        return Response(body, media_type="application/json")

    def _queries(request: SearchRequest) -> list[str]:
        if (request.q is None) == (request.queries is None):
            raise ClientError(422, "give either q (one query) or queries (a list), not both")
        queries = [request.q] if request.q is not None else list(request.queries or [])
        if not queries or len(queries) > limits.max_queries:
            raise ClientError(
                422, f"send 1 to {limits.max_queries} queries per request, not {len(queries)}"
            )
        if any(not query.strip() for query in queries):
            raise ClientError(422, "a query is empty: give some text to search for")
        longest = max(len(query) for query in queries)
        if longest > limits.max_query_chars:
            raise ClientError(
                422, f"a query has {longest} characters; the limit is {limits.max_query_chars}"
            )
        if request.k > limits.max_k:
            raise ClientError(422, f"k is {request.k}; the limit is {limits.max_k}")
        return queries

    @app.get("/indexes", dependencies=reader)
    def list_served(indexes: Registry) -> list[dict]:
        return [_summary(served) for served in indexes.indexes.values()]

    @app.get("/indexes/{name}", dependencies=reader)
    def describe(indexes: Registry, name: str) -> dict:
        served = indexes.get(name)
        folder = served.folder
        generations = [{"generation": m.generation, "created_at": m.created_at, "rows": m.rows,
                        "operation": {k: v for k, v in m.operation.items() if k != "tried"}}
                       for m in (folder.manifest(number) for number in folder.generations())]  # fmt: skip
        return {
            **_summary(served),
            "manifest": folder.manifest().to_dict(),
            "generations": generations,
        }

    @app.post("/indexes/{name}/documents", dependencies=writer)
    def upsert(indexes: Registry, name: str, body: DocumentsRequest) -> dict:
        """Add rows, or replace the rows of the same ids: the body is `{"rows": [{...}, ...]}`,
        each row with the index's id and text columns and any of its metadata columns
        (`GET /indexes/{name}` lists them); a field the index has no column for is refused.
        Needs the API key."""
        served = _healthy(indexes, name)
        if len(body.rows) > limits.max_documents:
            raise ClientError(
                422, f"{len(body.rows)} rows; the limit is {limits.max_documents} per request"
            )
        _check_columns(served, body.rows)
        try:
            table = pa.Table.from_pylist(body.rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ClientError(422, f"the rows do not form a table: {exc}") from None
        with _damage_reported(indexes, served, served.searcher.generation):
            result = Index(served.folder).add(table, encoder=served.searcher.encoder)
        indexes.refresh(served)
        return {"index": name, **result.to_dict()}

    @app.delete("/indexes/{name}/documents", dependencies=writer)
    def delete(indexes: Registry, name: str, body: DeleteRequest) -> dict:
        served = _healthy(indexes, name)
        if (body.ids is None) == (body.where is None):
            raise ClientError(422, "give either ids or where, not both")
        with _damage_reported(indexes, served, served.searcher.generation):
            result = Index(served.folder).delete(ids=body.ids, where=body.where)
        indexes.refresh(served)
        return {"index": name, **result.to_dict()}


GET_FIELDS = frozenset(SearchRequest.model_fields) - {"queries", "vector", "vectors"}


def _query_parameters(model: type[BaseModel], skip: set[str], required: set[str]) -> list[dict]:
    """OpenAPI query parameters for `model`'s fields, for a route that validates them itself."""
    schema = model.model_json_schema()
    return [{"name": name, "in": "query", "required": name in required,
             "description": field.get("description", ""), "schema": {k: v for k, v in field.items() if k != "description"}}
            for name, field in schema["properties"].items() if name not in skip]  # fmt: skip


def _answer(served: ServedIndex, searcher, mode: str, queries: list[str] | None, results) -> bytes:
    """The JSON body of a search: each query and its hits. A text query is its `query`; query
    vectors (`queries` None) are numbered by row, as `query_row` in the result and in each of
    its hits, which then carry the fields of `semsearch query --vectors --json`."""
    score_name = searcher.score_name_for(mode)
    answers = []
    for row, hits in enumerate(results):
        records = [hit.to_dict(score_name) for hit in hits]
        if queries is None:
            answers.append({"query_row": row, "hits": [_by_row(record, row) for record in records]})
        else:
            answers.append({"query": queries[row], "hits": records})
    answered = {"index": served.name, "generation": searcher.generation, "mode": mode,
                "results": answers}  # fmt: skip
    # What the library's bounds changed (a value clamped to what the index can use), one
    # line each, passed on as they are; absent when nothing was.
    notes = [api_words(note) for note in getattr(results, "notes", None) or ()]
    return json_bytes({**answered, "notes": notes} if notes else answered)


@contextmanager
def _damage_reported(
    indexes: IndexRegistry, served: ServedIndex, generation: int
) -> Iterator[None]:
    """A `DamagedIndexError` met while serving `served` (at `generation`) marks it unhealthy,
    for /ready and the requests after this one, before it is answered with a 503."""
    try:
        yield
    except DamagedIndexError as exc:
        indexes.mark_damaged(served, generation, str(exc))
        raise


def _by_row(record: dict, row: int) -> dict:
    """A vector query's hit: its query's row in place of a query text."""
    record.pop("query")
    return {"query_row": row, **record}


def _healthy(indexes: IndexRegistry, name: str | None) -> ServedIndex:
    served = indexes.get(name)
    if not served.healthy:
        raise ClientError(503, f"index {served.name!r} is unavailable: {served.problem}")
    return served


def _check_columns(served: ServedIndex, rows: list[dict]) -> None:
    """Refuse a field the index has no column for: written, it would silently widen the
    index's schema (every other row null there) on what may only be a typo."""
    known = {c for c in served.searcher.metadata_columns if not c.startswith("_semsearch")}
    manifest = served.searcher.manifest
    own = (manifest.text_column, manifest.id_column, manifest.source.vector_column)
    known |= {name for name in own if name}
    unknown = sorted({key for row in rows for key in row} - known)
    if unknown:
        raise ClientError(
            422,
            f"rows: {', '.join(map(repr, unknown))} {'is not a column' if len(unknown) == 1 else 'are not columns'} "
            f"of index {served.name!r}; its columns are {', '.join(sorted(known))}",
        )


def _generation(served: ServedIndex) -> int | None:
    return served.searcher.generation if served.searcher is not None else None


def _summary(served: ServedIndex) -> dict:
    if served.searcher is None:
        return {"name": served.name, "healthy": False, "problem": served.problem}
    manifest = served.searcher.manifest
    return {"name": served.name, "healthy": served.healthy, "problem": served.problem,
            "generation": manifest.generation, "rows": manifest.rows, "index": manifest.index.factory,
            "metric": manifest.index.metric, "model": manifest.model.name,
            "modes": ["dense", "lexical", "hybrid"] if manifest.lexical is not None else ["dense"],
            "columns": [c for c in served.searcher.metadata_columns if not c.startswith("_semsearch")]}  # fmt: skip


# The library's messages name the command line's flags; over HTTP the same things are the
# request's fields (`--where EXPR` is `where`).
_FLAGS = re.compile(
    r"(?<![\w-])--(where|ids|ef-search|nprobe|oversample|mode|fusion|alpha)(?: (?:EXPR|FILE))?\b"
)


def api_words(message: str) -> str:
    """`message` with the CLI's flags named as the API's fields."""
    return _FLAGS.sub(lambda match: match.group(1).replace("-", "_"), message)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
