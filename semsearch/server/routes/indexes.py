"""The served indexes: list and describe them, add or replace rows, delete rows."""

from __future__ import annotations

import pyarrow as pa
from fastapi import APIRouter, Request

from semsearch.index import Index
from semsearch.server.access import (
    READER,
    WRITER,
    ClientError,
    Registry,
    damage_reported,
    healthy,
)
from semsearch.server.registry import ServedIndex
from semsearch.server.schemas import DeleteRequest, DocumentsRequest

router = APIRouter(prefix="/indexes")


@router.get("", dependencies=READER)
def list_served(indexes: Registry) -> list[dict]:
    return [summary(served) for served in indexes.indexes.values()]


@router.get("/{name}", dependencies=READER)
def describe(indexes: Registry, name: str, request: Request) -> dict:
    """The index's summary, manifest and generations, and its live recall (`recall`: the
    rolling recall@10 of sampled served queries; absent when the monitor is off)."""
    served = indexes.get(name)
    index = Index(served.folder)
    described = {
        **summary(served),
        "manifest": index.manifest.view(),
        "generations": index.history(),
    }
    recall = request.app.state.recall_monitor.report(name)
    return described if recall is None else {**described, "recall": recall}


@router.post("/{name}/documents", dependencies=WRITER)
def upsert(indexes: Registry, name: str, body: DocumentsRequest, request: Request) -> dict:
    """Add rows, or replace the rows of the same ids: the body is `{"rows": [{...}, ...]}`,
    each row with the index's id and text columns and any of its metadata columns
    (`GET /indexes/{name}` lists them); a field the index has no column for is refused.
    Needs the API key."""
    served = healthy(indexes, name)
    limit = request.app.state.config.limits.max_documents
    if len(body.rows) > limit:
        raise ClientError(422, f"{len(body.rows)} rows; the limit is {limit} per request")
    _check_columns(served, body.rows)
    try:
        table = pa.Table.from_pylist(body.rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ClientError(422, f"the rows do not form a table: {exc}") from None
    with indexes.writing(), damage_reported(indexes, served, served.searcher.generation):
        result = Index(served.folder).add(table, encoder=served.searcher.encoder)
    indexes.refresh(served)
    return {"index": name, **result.to_dict()}


@router.delete("/{name}/documents", dependencies=WRITER)
def delete(indexes: Registry, name: str, body: DeleteRequest) -> dict:
    served = healthy(indexes, name)
    if (body.ids is None) == (body.where is None):
        raise ClientError(422, "give either ids or where, not both")
    with indexes.writing(), damage_reported(indexes, served, served.searcher.generation):
        result = Index(served.folder).delete(ids=body.ids, where=body.where)
    indexes.refresh(served)
    return {"index": name, **result.to_dict()}


def _check_columns(served: ServedIndex, rows: list[dict]) -> None:
    """Refuse a field the index has no column for: written, it would silently widen the
    index's schema (every other row null there) on what may only be a typo."""
    known = set(served.searcher.user_columns)
    manifest = served.searcher.manifest
    own = (manifest.text_column, manifest.id_column, manifest.source.vector_column)
    known |= {name for name in own if name}
    unknown = sorted({key for row in rows for key in row} - known)
    if unknown:
        verb = "is not a column" if len(unknown) == 1 else "are not columns"
        raise ClientError(
            422,
            f"rows: {', '.join(map(repr, unknown))} {verb} of index {served.name!r}; "
            f"its columns are {', '.join(sorted(known))}",
        )


def summary(served: ServedIndex) -> dict:
    if served.searcher is None:
        return {"name": served.name, "healthy": False, "problem": served.problem}
    manifest = served.searcher.manifest
    lexical = manifest.lexical is not None
    return {
        "name": served.name,
        "healthy": served.healthy,
        "problem": served.problem,
        "generation": manifest.generation,
        **manifest.counts(),  # documents, and chunks beside them where chunked
        "index": manifest.index.factory,
        "metric": manifest.index.metric,
        "model": manifest.model.name,
        "modes": ["dense", "lexical", "hybrid"] if lexical else ["dense"],
        "columns": served.searcher.user_columns,
    }
