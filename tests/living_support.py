"""Helpers for the living-index tests: generated corpora and builds on the tiny model."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.store.folders import IndexFolder

WORDS = [
    "guitar",
    "cat",
    "sofa",
    "market",
    "shares",
    "linux",
    "archive",
    "recipe",
    "cake",
    "json",
    "parser",
    "river",
    "bridge",
    "garden",
    "tomato",
    "engine",
    "rocket",
    "planet",
    "comet",
    "violin",
    "drum",
    "piano",
    "lamp",
    "window",
]


def generated_table(rows: int, start: int = 0) -> pa.Table:
    """Rows with distinct texts, a string id, a year and a licence to filter on."""
    ids = list(range(start, start + rows))
    texts = [f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7 + 3) % len(WORDS)]} number {i}" for i in ids]
    return pa.table(
        {
            "doc": [f"d{i}" for i in ids],
            "text": texts,
            "year": [2000 + i % 25 for i in ids],
            "license": ["MIT" if i % 10 == 0 else "GPL" if i % 3 == 0 else "BSD" for i in ids],
        }
    )


def write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def build(
    path: Path, out: Path, encoder, index: str = "flat", name: str = "docs", **changes
) -> IndexFolder:
    options = BuildOptions(
        corpus=path,
        name=name,
        id_column="doc",
        out_dir=out,
        index=index,
        show_progress=False,
        **changes,
    )
    return build_index(options, encoder=encoder)


def wide_search_params(index_type: str, nprobe: int, ef_search: int) -> dict[str, int]:
    """Search parameters that widen an approximate index's search: `nprobe` IVF lists (all
    of them makes it exact) or an HNSW beam of `ef_search`; nothing for a flat index."""
    if index_type.startswith("IVF"):
        return {"nprobe": nprobe}
    return {"efSearch": ef_search} if index_type == "hnsw" else {}
