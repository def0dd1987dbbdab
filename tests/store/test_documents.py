"""A chunked index keeps each document's columns once: split on write, joined on every read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ingest.test_chunked_index import build, write_documents

import semsearch.ingest.build as build_module
from semsearch.ingest.rows import LiveRows
from semsearch.search.where import WhereEvaluator
from semsearch.store.documents import DOCUMENT_ROW_COLUMN, DocumentSplit, join
from semsearch.store.verify import verify_index

SPLIT = DocumentSplit("doc", frozenset({"doc", "text", "chunk_id"}))


def chunk_rows() -> pa.Table:
    """Chunks of three documents, the third one's chunks apart from each other, with a
    null title and a list column (compared cell by cell)."""
    return pa.table(
        {
            "chunk_id": ["a#0", "a#1", "b#0", "c#0", "b#1"],
            "doc": ["a", "a", "b", "c", "b"],
            "title": ["A", "A", None, "C", None],
            "tags": [["x"], ["x"], [], ["y", "z"], []],
            "text": ["a one", "a two", "b one", "c one", "b two"],
        }
    )


def test_split_keeps_a_document_once_per_run_and_join_restores_the_rows() -> None:
    chunks, documents = SPLIT.split(chunk_rows())
    assert chunks.column_names == ["chunk_id", "doc", "text", DOCUMENT_ROW_COLUMN]
    assert documents.column("doc").to_pylist() == ["a", "b", "c", "b"]  # b twice: two runs
    assert chunks.column(DOCUMENT_ROW_COLUMN).to_pylist() == [0, 0, 1, 2, 3]
    assert join(chunks, documents).equals(chunk_rows())
    assert join(chunks, documents, ["title", "text"]).column_names == ["title", "text"]


def test_a_column_that_changes_within_a_document_is_never_lost() -> None:
    rows = chunk_rows().set_column(2, "title", pa.array(["A", "A2", None, "C", None]))
    chunks, documents = SPLIT.split(rows)
    assert len(documents) == 5
    assert join(chunks, documents).equals(rows)


@pytest.fixture()
def chunked(tiny_model_dir: Path, tmp_path: Path):
    folder = tmp_path / "docs"
    texts = write_documents(folder)
    return build(folder, tiny_model_dir, tmp_path / "indexes", name="docs"), texts


def test_a_chunked_part_stores_each_documents_columns_once(chunked) -> None:
    index, texts = chunked
    (record,) = index.manifest.segments
    assert record.documents
    segment = index.folder.segment_dir(record.name)
    chunk_part = pq.read_table(segment / "part-00000.parquet")
    documents = pq.read_table(segment / "part-00000.documents.parquet")
    assert sorted(documents.column("id").to_pylist()) == sorted(texts)
    assert not {"title", "path", "modified", "bytes"} & set(chunk_part.column_names)
    assert {"id", "chunk_id", "text", DOCUMENT_ROW_COLUMN} <= set(chunk_part.column_names)
    assert chunk_part.num_rows > 3 * documents.num_rows  # several chunks a document
    # Every reader sees the columns a chunk always had, in their order.
    live = LiveRows.read(index.folder, index.manifest)
    table = live.segments[0].metadata()
    assert [
        name for name in table.column_names if name in {"chunk_id", "id", "text", "title", "path"}
    ] == ["chunk_id", "id", "text", "title", "path"]
    by_id = dict(zip(documents.column("id").to_pylist(), documents.column("title").to_pylist()))
    assert table.column("title").to_pylist() == [by_id[d] for d in table.column("id").to_pylist()]


def test_hits_and_where_read_the_documents_columns(chunked) -> None:
    index, _ = chunked
    hits = index.search(["engines"], k=3)[0]
    assert hits and all(hit.metadata["title"] == f"All about {hit.id[:-3]}" for hit in hits)
    filtered = index.search(["engines"], k=3, where="title = 'All about oceans'")[0]
    assert [hit.id for hit in filtered] == ["oceans.md"]


def test_verify_refuses_a_tampered_documents_table(chunked) -> None:
    index, _ = chunked
    assert verify_index(index.folder).status == "ok"
    path = index.folder.segment_dir(index.manifest.segments[0].name) / "part-00000.documents.arrow"
    path.write_bytes(path.read_bytes()[:-8] + b"tampered")
    report = verify_index(index.folder)
    assert report.status == "damaged"
    assert any("part-00000.documents.arrow" in problem for problem in report.problems)


def test_segments_written_before_the_split_read_beside_new_ones(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index built before documents were kept apart (its chunk rows carry every column)
    still answers, and an add writes a split segment beside it: `--where` reads both."""
    folder = tmp_path / "docs"
    write_documents(folder)
    monkeypatch.setattr(build_module, "document_split", lambda chunks, text: None)
    index = build(folder, tiny_model_dir, tmp_path / "indexes", name="docs")
    monkeypatch.undo()
    assert not index.manifest.segments[0].documents
    (folder / "violins.md").write_text("# Violins again\n\nA new text about violins.\n")
    index.add(folder)
    old, new = index.manifest.segments[-2:]
    assert not old.documents and new.documents
    live = LiveRows.read(index.folder, index.manifest)
    files = [f for segment in live.segments for f in segment.metadata_files()]
    mask = WhereEvaluator(files, len(live.live)).mask("title LIKE 'Violins%'")
    titles = live.metadata_at(np.flatnonzero(mask), ["title"]).column("title").to_pylist()
    assert titles and set(titles) == {"Violins again"}
    hits = index.search(["violins"], k=2, where="title = 'Violins again'")[0]
    assert [hit.id for hit in hits] == ["violins.md"]
    assert json.loads(json.dumps(hits[0].metadata, default=str))["title"] == "Violins again"
