"""GET and POST /search: texts encoded by the index's micro-batcher, or vectors as given."""

from __future__ import annotations

import asyncio
import time
from contextlib import nullcontext

import numpy as np
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from semsearch import phases
from semsearch.errors import SemsearchError
from semsearch.io.own_vectors import no_model_message, query_vectors
from semsearch.models.prompts import with_prompt
from semsearch.search.hybrid import Fusion
from semsearch.server.access import (
    READER,
    ClientError,
    Registry,
    api_words,
    authorised,
    damage_reported,
    healthy,
    registry,
)
from semsearch.server.guard import json_bytes
from semsearch.server.recall_monitor import RecallMonitor
from semsearch.server.registry import IndexRegistry, ServedIndex
from semsearch.server.schemas import Limits, SearchRequest

router = APIRouter()

GET_FIELDS = frozenset(SearchRequest.model_fields) - {"queries", "vector", "vectors"}


def _query_parameters(model: type[BaseModel], skip: set[str], required: set[str]) -> list[dict]:
    """OpenAPI query parameters for `model`'s fields, for a route that validates them itself."""
    schema = model.model_json_schema()
    return [
        {
            "name": name,
            "in": "query",
            "required": name in required,
            "description": field.get("description", ""),
            "schema": {k: v for k, v in field.items() if k != "description"},
        }
        for name, field in schema["properties"].items()
        if name not in skip
    ]


# GET /search reads its parameters itself, with one validation of the same model POST takes:
# FastAPI solving ten query parameters one by one cost about 85 microseconds a request of
# Python (holding the GIL the encoder threads also want), a third of that.
@router.get(
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
    indexes = await registry(request)
    given = {name: value for name, value in request.query_params.items() if name in GET_FIELDS}
    if "q" not in given:
        raise ClientError(422, "q: the query is missing: add ?q=... to the URL")
    try:
        search = SearchRequest.model_validate(given)
    except ValidationError as exc:  # answered like FastAPI's own parameter errors
        raise RequestValidationError(
            [{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]
        ) from None
    state = request.app.state
    with state.recall_monitor.serving():
        return await _search(indexes, search, state.config.limits, state.recall_monitor)


@router.post("/search", dependencies=READER)
async def search_post(indexes: Registry, body: SearchRequest, request: Request) -> Response:
    state = request.app.state
    with state.recall_monitor.serving():
        return await _search(indexes, body, state.config.limits, state.recall_monitor)


async def _search(
    indexes: IndexRegistry, request: SearchRequest, limits: Limits, monitor: RecallMonitor
) -> Response:
    """Texts (`q`, `queries`) encoded by the index's micro-batcher, or vectors (`vector`,
    `vectors`) searched as they are (dense only), with no encoder involved. The monitor is
    offered the dense queries, with the generation that answered them."""
    by_vector = request.vector is not None or request.vectors is not None
    given = _vectors(request, limits) if by_vector else None
    queries = None if by_vector else _queries(request, limits)
    served = healthy(indexes, request.index)
    searcher = served.searcher  # one generation for the whole request
    fusion = Fusion(
        request.fusion, **({"alpha": request.alpha} if request.alpha is not None else {})
    )
    if request.mode != "dense":
        searcher.snapshot.check_lexical()  # refused before anything is encoded

    # `explain`: the request timed from here; its texts' encoding is the span from their
    # submission to the answer (a batch shared with other requests, its wait included).
    timer = phases.PhaseTimer() if request.explain else None
    submitted: list[float] = []

    def answer(vectors: np.ndarray | None) -> bytes:
        """Search and render (on the encoder's worker thread, right after encoding)."""
        if timer is not None and submitted:
            timer.record("encode", submitted[0], timer.clock())
            timer.note(encode="in a batch with other requests' queries, its wait included")
        snapshot = searcher.snapshot
        with phases.timing(timer=timer) if timer is not None else nullcontext():
            results = searcher.search_vectors(
                vectors,
                request.k,
                request.where,
                queries=queries,
                mode=request.mode,
                fusion=fusion,
                group=request.group,
                explain=request.explain,
                nprobe=request.nprobe,
                efSearch=request.ef_search,
                oversample=request.oversample,
            )
        if vectors is not None and searcher.snapshot is snapshot:  # the one that answered
            monitor.offer(served.name, snapshot, vectors, request.where, results.params)
        return _answer(served, searcher, request.mode, queries, results)

    with damage_reported(indexes, served, searcher.generation):
        if given is not None:
            vectors = query_vectors(given, searcher.manifest.model.dimension)
            body = await run_in_threadpool(answer, vectors)
        elif request.mode == "lexical":  # BM25 needs no vectors: no encoder, no batch
            body = await run_in_threadpool(answer, None)
        elif served.batcher is None:  # your own vectors and no model: nothing encodes texts
            raise SemsearchError(no_model_message(served.name, '"vector": [...]'))
        else:
            prompted = with_prompt(queries, searcher.query_prompt)  # the index's prompt
            submitted.append(time.perf_counter())
            body = await asyncio.wrap_future(served.batcher.submit(prompted, then=answer))
    return Response(body, media_type="application/json")


def _vectors(request: SearchRequest, limits: Limits) -> list[list[float]]:
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
    return given


def _queries(request: SearchRequest, limits: Limits) -> list[str]:
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
    answered = {
        "index": served.name,
        "generation": searcher.generation,
        "mode": mode,
        "results": answers,
    }
    # What the library's bounds changed (a value clamped to what the index can use), one
    # line each, passed on as they are; absent when nothing was.
    notes = [api_words(note) for note in getattr(results, "notes", None) or ()]
    if notes:
        answered["notes"] = notes
    if getattr(results, "explain", None) is not None:  # asked for: how it ran, stage by stage
        answered["explain"] = results.explain
    return json_bytes(answered)


def _by_row(record: dict, row: int) -> dict:
    """A vector query's hit: its query's row in place of a query text."""
    record.pop("query")
    return {"query_row": row, **record}
