"""The server's settings, its limits, and the shapes of its request bodies."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from semsearch.options import DEFAULT_FUSION, FusionMethod, Group, SearchMode
from semsearch.search.limits import MAX_OVERSAMPLE
from semsearch.server.recall_monitor import MonitorSettings
from semsearch.store.folders import DEFAULT_INDEX_DIR


@dataclass(frozen=True)
class Limits:
    """What one request may ask; beyond it the answer is a 4xx naming the limit."""

    max_k: int = 1000
    max_query_chars: int = 2000
    max_queries: int = 64
    max_body_bytes: int = 8 * 2**20
    max_documents: int = 10_000


# Hard ceilings of the per-call search knobs, the same for every server: HNSW keeps a heap of
# ef_search entries per query (ef_search 10^9 took 18 s and 9 GB on a 20-row index), so
# a value beyond any index's use is refused before it reaches FAISS. The library clamps
# what is under them to what the index at hand can use.
MAX_EF_SEARCH = 16_384
MAX_NPROBE = 65_536


@dataclass(frozen=True)
class ServerConfig:
    """Which indexes to serve and how; `api_key` None turns the write endpoints off."""

    index_dir: Path = DEFAULT_INDEX_DIR
    names: list[str] = field(default_factory=list)  # empty: every index in index_dir
    device: str = "auto"
    api_key: str | None = None
    limits: Limits = Limits()
    # On a CPU, workers taking 8 queries at a time answer in arrival order: at concurrency 32
    # on the 841k index p99 was 142 ms with 8, 175 ms with 16 and 235 ms with 32 (measured).
    max_batch: int = 8
    max_wait_ms: float = 3.0
    precision: str = "auto"  # of query encoding on a CPU: see models/query_precision.py
    refresh_every_s: float = 0.25
    recall: MonitorSettings = MonitorSettings()  # the live recall monitor's sampling and budget


class SearchRequest(BaseModel):
    """`POST /search`: one query (`q`) or many (`queries`), searched the same way."""

    model_config = ConfigDict(extra="forbid")

    q: str | None = Field(None, description="One query.")
    queries: list[str] | None = Field(None, description="Several queries (instead of q).")
    vector: list[float] | None = Field(
        None, description="One query vector (instead of q), of the index's dimension."
    )
    vectors: list[list[float]] | None = Field(
        None, description="Several query vectors (instead of queries), one a list."
    )
    k: int = Field(10, ge=1, description="Results per query.")
    index: str | None = Field(None, description="Index name (optional when one is served).")
    where: str | None = Field(None, description="SQL condition on the metadata.")
    nprobe: int | None = Field(
        None, ge=1, le=MAX_NPROBE, description="IVF lists to visit, this call only."
    )
    ef_search: int | None = Field(
        None, ge=1, le=MAX_EF_SEARCH, description="HNSW candidate list, this call only."
    )
    oversample: int | None = Field(
        None,
        ge=1,
        le=MAX_OVERSAMPLE,
        description="A disk index's candidates re-scored per result, this call only.",
    )
    mode: SearchMode = Field(
        "dense", description="dense (vectors), lexical (BM25) or hybrid (both, fused)."
    )
    group: Group = Field(
        "documents",
        description="On a chunked index: documents (each once, by its best chunk, with the "
        "passage that matched) or chunks.",
    )
    fusion: FusionMethod = Field(
        DEFAULT_FUSION,
        description="How hybrid fuses: adaptive (BM25 weighs less where its top scores are "
        "flat), reciprocal rank (rrf) or convex.",
    )
    alpha: float | None = Field(
        None, ge=0, le=1, description="The dense side's weight (convex; adaptive's least)."
    )
    explain: bool = Field(
        False,
        description="Also say how the search ran and where its time went (`explain` in the "
        "answer: the plan, its parameters, the candidates, each stage's seconds).",
    )

    @field_validator("q", "queries", "index", "where")
    @classmethod
    def _encodable(cls, value: str | list[str] | None) -> str | list[str] | None:
        """Text a tokenizer can read: JSON may carry lone surrogates (`"\\ud800"`), which
        are no characters and which neither the tokenizer nor a JSON answer can hold."""
        for text in [value] if isinstance(value, str) else value or []:
            _check_utf8(text)
        return value


class DocumentsRequest(BaseModel):
    """`POST /indexes/{name}/documents`: rows to upsert (added, or replacing the row of the
    same id), each with the index's id and text columns and, optionally, its metadata
    columns. A column the index does not have is refused: a write never widens the schema."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"rows": [{"id": "doc-1", "text": "A violin concert tonight.", "topic": "music"}]}
            ]
        },
    )

    rows: list[dict[str, Any]] = Field(
        ...,
        min_length=1,
        description="One object per row: the index's id column, its text column, and any of "
        "its metadata columns (GET /indexes/{name} lists them).",
    )

    @field_validator("rows")
    @classmethod
    def _encodable(cls, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for row in rows:
            for key, value in row.items():
                _check_utf8(key)
                if isinstance(value, str):
                    _check_utf8(value)
        return rows


class DeleteRequest(BaseModel):
    """`DELETE /indexes/{name}/documents`: by ids, or by a SQL condition."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str | int] | None = None
    where: str | None = None


def _check_utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"holds {exc.object[exc.start : exc.end]!a} at character {exc.start}, "
            "a lone surrogate that is no character: send valid UTF-8 text"
        ) from None
