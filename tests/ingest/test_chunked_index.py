"""Chunked indexes: folders of documents and long texts cut into chunks, one hit per document
with the passage that matched, and documents that change (add, delete, compact, mine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import CliRunner
from server.conftest import serve

from semsearch.cli.app import app
from semsearch.errors import SemsearchError
from semsearch.index import Index
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.rows import LiveRows
from semsearch.ingest.update import delete_rows
from semsearch.mining.miner import MiningOptions, mine_index
from semsearch.search.searcher import Searcher
from semsearch.store.manifest import CHUNK_ID_COLUMN
from semsearch.store.verify import verify_index

TOPICS = ["violins", "gardens", "engines", "oceans", "printers", "mountains"]


def paragraph(topic: str, number: int) -> str:
    return (
        f"Paragraph {number} about {topic}. It says one thing about {topic}, then another, "
        f"and a third thing that only a long text about {topic} would say."
    )


def write_documents(folder: Path, paragraphs: int = 6) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    texts = {}
    for topic in TOPICS:
        body = "\n\n".join(paragraph(topic, n) for n in range(paragraphs))
        text = f"# All about {topic}\n\n{body}\n"
        (folder / f"{topic}.md").write_text(text, encoding="utf-8")
        texts[f"{topic}.md"] = text
    return texts


def build(corpus: Path, model: Path, out: Path, **options) -> Index:
    defaults = dict(chunking="on", chunk_tokens=24, chunk_overlap=4, target_recall=None)
    return Index(
        build_index(
            BuildOptions(
                corpus=corpus,
                model=str(model),
                out_dir=out,
                show_progress=False,
                runtime="torch",
                **{**defaults, **options},
            )
        )
    )


def live_rows(index: Index) -> list[dict]:
    """The metadata of the index's live rows (chunks), deleted ones left out."""
    live = LiveRows.read(index.folder, index.manifest)
    columns = ["id", "text", "title", CHUNK_ID_COLUMN, "start", "end"]
    return live.metadata_at(np.flatnonzero(live.live), columns).to_pylist()


@pytest.fixture()
def documents(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "docs"
    return folder, write_documents(folder)


def test_a_folder_becomes_chunk_rows_that_point_into_their_documents(
    documents, tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder, texts = documents
    index = build(folder, tiny_model_dir, tmp_path / "indexes")
    manifest = index.manifest
    assert manifest.chunks is not None and manifest.chunks.tokens == 24
    assert manifest.source.format == "documents"
    rows = live_rows(index)
    assert len(rows) == manifest.rows > len(texts)  # several chunks a document
    assert len({row[CHUNK_ID_COLUMN] for row in rows}) == len(rows)
    for row in rows:
        assert texts[row["id"]][row["start"] : row["end"]] == row["text"]
        assert row["title"] == f"All about {row['id'].removesuffix('.md')}"
    per_document = {name: sorted(r["start"] for r in rows if r["id"] == name) for name in texts}
    assert all(len(starts) > 1 and starts[0] == 0 for starts in per_document.values())


def test_a_query_returns_k_distinct_documents_each_with_its_passage(
    documents, tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder, texts = documents
    index = build(folder, tiny_model_dir, tmp_path / "indexes")
    hits = index.search(["a third thing about engines"], k=4)[0]
    assert len(hits) == 4 and len({hit.id for hit in hits}) == 4
    for hit in hits:
        assert texts[hit.id][hit.start : hit.end] == hit.text
        record = hit.to_dict()
        assert record["chunk"] == hit.text and "text" not in record
        assert (record["start"], record["end"]) == (hit.start, hit.end)
    chunks = index.searcher().search(["a third thing about engines"], k=12, group="chunks")[0]
    assert len(chunks) == 12 and len({hit.id for hit in chunks}) < 12  # documents repeat
    everything = index.search(["engines"], k=50)[0]
    assert len(everything) == len(texts)  # as many documents as there are, never more


def test_auto_builds_a_corpus_of_short_texts_exactly_as_before(
    corpus_file: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    auto = build(corpus_file, tiny_model_dir, tmp_path / "a", chunking="auto", chunk_tokens=None)
    off = build(corpus_file, tiny_model_dir, tmp_path / "b", chunking="off", chunk_tokens=None)
    assert auto.manifest.chunks is None
    assert auto.manifest.rows == off.manifest.rows
    assert Searcher(auto.folder, vectors_only=True).metadata.equals(
        Searcher(off.folder, vectors_only=True).metadata
    )


def test_auto_chunks_a_long_text_column_and_numbers_documents_by_row(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    long_text = " ".join(paragraph("rivers", n) for n in range(30))
    corpus = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"text": ["a short one", long_text, "another short one"]}), corpus)
    index = build(corpus, tiny_model_dir, tmp_path / "i", chunking="auto", chunk_tokens=None)
    assert index.manifest.chunks is not None
    assert index.manifest.chunks.document_column == "document"
    hits = index.search(["rivers"], k=3)[0]
    assert sorted(hit.id for hit in hits) == [0, 1, 2]
    long_hit = next(hit for hit in hits if hit.id == 1)
    assert long_text[long_hit.start : long_hit.end] == long_hit.text


def test_add_replaces_a_changed_documents_chunks_and_skips_the_unchanged(
    documents, tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder, texts = documents
    index = build(folder, tiny_model_dir, tmp_path / "indexes")
    before = live_rows(index)
    old_chunks = sum(row["id"] == "oceans.md" for row in before)
    (folder / "oceans.md").write_text("# Oceans\n\nOnly one short paragraph now.\n")
    result = index.add(folder)
    after = live_rows(index)
    live = [row for row in after if row["id"] == "oceans.md"]
    assert len(live) == 1 and live[0]["text"].startswith("# Oceans")
    # Counted in documents, and in chunks beside them: the shorter document's tail went with it.
    assert (result.added, result.replaced, result.unchanged, result.deleted) == (0, 1, 5, 0)
    assert result.chunks["deleted"] == old_chunks - 1
    assert result.chunks["unchanged"] == sum(row["id"] != "oceans.md" for row in before)
    assert index.manifest.documents == len(texts)
    assert index.add(folder).generation is None  # nothing changed: no new generation


def test_delete_by_document_id_removes_every_chunk(
    documents, tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder, texts = documents
    index = build(folder, tiny_model_dir, tmp_path / "indexes")
    chunks = sum(row["id"] == "gardens.md" for row in live_rows(index))
    result = delete_rows(index.folder, ["gardens.md", "nowhere.md"])
    assert (result.deleted, result.not_found, result.chunks) == (1, 1, {"deleted": chunks})
    assert index.manifest.documents == len(texts) - 1
    assert "gardens.md" not in {hit.id for hit in index.search(["gardens"], k=10)[0]}
    index.compact()
    assert verify_index(index.folder).status == "ok"
    assert index.manifest.chunks is not None
    assert "gardens.md" not in {hit.id for hit in index.search(["gardens"], k=10)[0]}


def test_mining_a_chunked_index_pairs_documents_by_their_passages(
    documents, tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder, texts = documents
    build(folder, tiny_model_dir, tmp_path / "indexes")
    result = mine_index("docs", tmp_path / "indexes", MiningOptions(top_k=20, show_progress=False))
    table = result.to_table()
    assert table.num_rows > 0
    pairs = list(zip(table.column("id_a").to_pylist(), table.column("id_b").to_pylist()))
    assert all(a != b for a, b in pairs)  # never two chunks of one document
    assert len({frozenset(pair) for pair in pairs}) == len(pairs)  # each pair of documents once
    assert all(
        text in texts[a]
        for a, text in zip(table.column("id_a").to_pylist(), table.column("text_a").to_pylist())
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--chunk-tokens", "4000"], "--chunk-tokens"),
        (["--chunk-tokens", "20", "--chunk-overlap", "20"], "--chunk-overlap"),
        (["--chunking", "sometimes"], "--chunking"),
    ],
)
def test_chunk_sizes_the_model_cannot_take_are_one_line_errors(
    documents, tiny_model_dir: Path, tmp_path: Path, options: list[str], message: str
) -> None:
    folder, _ = documents
    result = CliRunner().invoke(
        app,
        [
            "build",
            str(folder),
            "--model",
            str(tiny_model_dir),
            "--out-dir",
            str(tmp_path / "i"),
            *options,
        ],
    )
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "i" / "docs").exists()


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_bm25_ranks_the_same_chunks_and_groups_them_by_document(
    documents, tiny_model_dir: Path, tmp_path: Path, mode: str
) -> None:
    folder, texts = documents
    index = build(folder, tiny_model_dir, tmp_path / "indexes")
    hits = index.search(["printers"], k=3, mode=mode)[0]
    assert len({hit.id for hit in hits}) == len(hits)  # each document once
    assert len(hits) == (1 if mode == "lexical" else 3)  # BM25 finds the one that names them
    assert hits[0].id == "printers.md"  # the only document that names them
    assert (
        "printers" in hits[0].text
        and texts[hits[0].id][hits[0].start : hits[0].end] == hits[0].text
    )


def test_adding_an_unchanged_folder_loads_no_model(
    documents, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Only the tokenizer cuts the files again; the chunks' hashes show nothing changed."""
    folder, _ = documents
    index = build(folder, tiny_model_dir, tmp_path / "indexes")
    script = (
        "import sys\n"
        "from semsearch.index import Index\n"
        f"result = Index.open('docs', {str(tmp_path / 'indexes')!r}).add({str(folder)!r})\n"
        "print(result.generation, result.unchanged, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.split() == ["None", str(index.manifest.documents), "False"], done.stderr


def test_hits_carry_the_passage_on_the_command_line_and_over_http(
    documents, tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder, texts = documents
    index_dir = tmp_path / "indexes"
    build(folder, tiny_model_dir, index_dir)
    result = CliRunner().invoke(
        app,
        ["query", "violins", "--index", "docs", "--index-dir", str(index_dir), "--json", "-k", "2"],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 2 and len({record["id"] for record in records}) == 2
    for record in records:
        assert texts[record["id"]][record["start"] : record["end"]] == record["chunk"]
        assert {"title", "path", "modified", "bytes"} <= set(record)
    with serve(index_dir) as client:
        answer = client.get("/search", params={"q": "violins", "k": 3, "index": "docs"})
        hits = answer.json()["results"][0]["hits"]
        assert answer.status_code == 200 and len({hit["id"] for hit in hits}) == 3
        assert all(texts[hit["id"]][hit["start"] : hit["end"]] == hit["chunk"] for hit in hits)
        chunks = client.get(
            "/search", params={"q": "violins", "k": 8, "index": "docs", "group": "chunks"}
        )
        found = chunks.json()["results"][0]["hits"]
        assert len({(hit["id"], hit["start"]) for hit in found}) == len(found) == 8
        assert not {"chunk_id", "chunk_number"} & {key for hit in found for key in hit}


def test_chunk_rows_hold_each_chunk_once_not_the_document_per_chunk(tmp_path: Path) -> None:
    """A 30 MiB file once overflowed Arrow's 2 GiB string limit: its 1 MiB pieces were copied
    into every one of their chunk rows before each chunk's text replaced them."""
    from semsearch.ingest.chunk_rows import ChunkedCorpus, chunker_for
    from semsearch.io.documents import open_documents
    from semsearch.models.model_folder import resolve_model

    folder = tmp_path / "docs"
    folder.mkdir()
    text = "\n\n".join(paragraph(TOPICS[n % 6], n) for n in range(600))
    (folder / "long.txt").write_text(text, encoding="utf-8")
    chunker = chunker_for(resolve_model("default"), None, 8, markdown=False)
    batches = list(ChunkedCorpus(open_documents(folder), chunker, "text", "id").batches())
    rows = sum(batch.num_rows for batch in batches)
    assert rows > 100
    assert sum(batch.nbytes for batch in batches) < 4 * len(text.encode())


def test_a_folder_of_table_files_with_long_texts_is_chunked_as_one_stream(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "tables"
    folder.mkdir()
    long_text = " ".join(paragraph("canals", n) for n in range(30))
    pq.write_table(
        pa.table({"id": ["a", "b"], "text": ["short one", long_text]}), folder / "1.parquet"
    )
    pq.write_table(pa.table({"id": ["c"], "text": ["another short one"]}), folder / "2.parquet")
    index = build(
        folder, tiny_model_dir, tmp_path / "i", chunking="auto", chunk_tokens=None, id_column="id"
    )
    assert index.manifest.chunks is not None and index.manifest.chunks.document_column == "id"
    hits = index.search(["canals"], k=3)[0]
    assert sorted(hit.id for hit in hits) == ["a", "b", "c"]
    hit = next(hit for hit in hits if hit.id == "b")
    assert long_text[hit.start : hit.end] == hit.text
    pq.write_table(pa.table({"id": ["c"], "text": ["changed"]}), folder / "2.parquet")
    result = index.add(folder)
    assert (result.replaced, result.unchanged) == (1, 2)  # documents, the files' rows
    assert (index.manifest.documents, index.manifest.source.rows_read) == (3, 3)


def test_a_folder_of_short_table_files_builds_as_before(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "tables"
    folder.mkdir()
    for number in range(2):
        table = pa.table({"id": [f"{number}-a", f"{number}-b"], "text": ["short", "texts"]})
        pq.write_table(table, folder / f"{number}.parquet")
    index = build(folder, tiny_model_dir, tmp_path / "i", chunking="auto", chunk_tokens=None)
    assert index.manifest.chunks is None and index.manifest.rows == 4


def test_a_build_cuts_each_text_once_though_it_reads_the_corpus_twice(
    documents, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from semsearch.ingest.chunking import Chunker

    folder, texts = documents
    cut: list[str] = []
    split = Chunker._split
    monkeypatch.setattr(Chunker, "_split", lambda self, text: cut.append(text) or split(self, text))
    build(folder, tiny_model_dir, tmp_path / "indexes")
    assert len(cut) == len(texts)  # counted, then encoded: one cut each


def test_files_named_by_a_uri_are_chunked_too(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tables"
    folder.mkdir()
    long_text = " ".join(paragraph("harbours", n) for n in range(30))
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["short", long_text]}), folder / "1.parquet")
    uri = folder.as_uri()  # file:///…/tables
    index = build(
        uri, tiny_model_dir, tmp_path / "i", chunking="auto", chunk_tokens=None, id_column="id"
    )
    assert index.manifest.chunks is not None and index.manifest.source.path == uri
    hit = next(hit for hit in index.search(["harbours"], k=2)[0] if hit.id == "b")
    assert long_text[hit.start : hit.end] == hit.text
    pq.write_table(pa.table({"id": ["c"], "text": ["new"]}), folder / "2.parquet")
    assert index.add(uri).added == 1


def test_an_index_that_numbers_its_documents_by_row_refuses_an_add(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Row 0 of another file would be taken for the index's document 0 and replace it."""
    long_text = " ".join(paragraph("rivers", n) for n in range(30))
    corpus = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"text": [long_text, "a short one"]}), corpus)
    index = build(corpus, tiny_model_dir, tmp_path / "i", chunking="on", chunk_tokens=None)
    more = tmp_path / "more.parquet"
    pq.write_table(pa.table({"text": ["an unrelated new text"]}), more)
    with pytest.raises(SemsearchError, match="numbers its documents by row"):
        index.add(more)
    assert index.manifest.generation == 1
    result = CliRunner().invoke(
        app, ["add", str(more), "--index", "rows", "--index-dir", str(tmp_path / "i")]
    )
    assert result.exit_code != 0 and "--id-column" in result.output
    assert "Traceback" not in result.output
