"""The server's settings, its limits, and the shapes of its request bodies."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from semsearch.index.store import DEFAULT_INDEX_DIR
from semsearch.options import FusionMethod, SearchMode


@dataclass(frozen=True)
class Limits:
    """What one request may ask; beyond it the answer is a 4xx naming the limit."""

    max_k: int = 1000
    max_query_chars: int = 2000
    max_queries: int = 64
    max_body_bytes: int = 8 * 2**20
    max_documents: int = 10_000


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


class SearchRequest(BaseModel):
    """`POST /search`: one query (`q`) or many (`queries`), searched the same way."""

    model_config = ConfigDict(extra="forbid")

    q: str | None = Field(None, description="One query.")
    queries: list[str] | None = Field(None, description="Several queries (instead of q).")
    k: int = Field(10, ge=1, description="Results per query.")
    index: str | None = Field(None, description="Index name (optional when one is served).")
    where: str | None = Field(None, description="SQL condition on the metadata.")
    nprobe: int | None = Field(None, ge=1, description="IVF lists to visit, this call only.")
    ef_search: int | None = Field(None, ge=1, description="HNSW candidate list, this call only.")
    mode: SearchMode = Field(
        "dense", description="dense (vectors), lexical (BM25) or hybrid (both, fused)."
    )
    fusion: FusionMethod = Field(
        "rrf", description="How hybrid fuses: reciprocal rank (rrf) or convex."
    )
    alpha: float | None = Field(
        None, ge=0, le=1, description="Convex fusion's weight of the dense side."
    )


class DocumentsRequest(BaseModel):
    """`POST /indexes/{name}/documents`: rows to upsert, each with the index's id and text."""

    model_config = ConfigDict(extra="forbid")

    rows: list[dict[str, Any]] = Field(..., min_length=1)


class DeleteRequest(BaseModel):
    """`DELETE /indexes/{name}/documents`: by ids, or by a SQL condition."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str | int] | None = None
    where: str | None = None
