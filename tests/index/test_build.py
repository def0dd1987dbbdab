"""Building an index folder: contents, atomicity, overwrite and resume."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.index.build import BuildOptions, build_index
from semsearch.index.store import IndexFolder


def _options(corpus, out_dir, **changes) -> BuildOptions:
    return BuildOptions(corpus=corpus, name="docs", id_column="doc_id", out_dir=out_dir,
                        show_progress=False, **changes)  # fmt: skip


def test_folder_holds_index_metadata_and_manifest(
    corpus_file, tmp_path, tiny_encoder, sentences
) -> None:
    folder = build_index(_options(corpus_file, tmp_path), encoder=tiny_encoder)
    assert sorted(p.name for p in folder.path.iterdir()) == [
        "index.faiss",
        "manifest.json",
        "metadata.parquet",
    ]
    manifest = folder.manifest()
    assert manifest.rows == len(sentences)
    assert manifest.index.factory == "Flat" and manifest.index.metric == "cosine"
    assert manifest.model.fingerprint == tiny_encoder.fingerprint
    assert manifest.source.id_column == "doc_id" and len(manifest.source.sha256) == 64
    metadata = pq.read_table(folder.metadata_file)
    assert set(metadata.column_names) >= {"doc_id", "text", "topic", "_source_row"}
    # Row i of the metadata is vector i: each text's own vector is its nearest neighbour.
    index = folder.read_index(manifest)
    vectors = tiny_encoder.encode(metadata.column("text").to_pylist())
    _, nearest = index.search(vectors, 1)
    assert nearest[:, 0].tolist() == list(range(len(sentences)))


def test_existing_index_needs_overwrite(corpus_file, tmp_path, tiny_encoder) -> None:
    build_index(_options(corpus_file, tmp_path), encoder=tiny_encoder)
    with pytest.raises(SemsearchError, match="already exists.*--overwrite"):
        build_index(_options(corpus_file, tmp_path), encoder=tiny_encoder)
    folder = build_index(
        _options(corpus_file, tmp_path, overwrite=True, index="hnsw"), encoder=tiny_encoder
    )
    assert folder.manifest().index.factory.startswith("HNSW")
    assert [p.name for p in tmp_path.iterdir() if p.name != "corpus.parquet"] == ["docs"]


def test_bad_input_leaves_no_folder(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "dup.parquet"
    pq.write_table(pa.table({"doc_id": ["a", "b", "a"], "text": ["x", "y", "z"]}), path)
    with pytest.raises(SemsearchError, match="more than once"):
        build_index(_options(path, tmp_path / "out", shard_rows=1), encoder=tiny_encoder)
    assert not any((tmp_path / "out").iterdir())


def test_corpus_with_only_empty_texts_is_refused(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"doc_id": ["a", "b"], "text": ["", None]}, schema=pa.schema(
        [("doc_id", pa.string()), ("text", pa.string())])), path)  # fmt: skip
    with pytest.raises(SemsearchError, match="nothing to index"):
        build_index(_options(path, tmp_path / "out"), encoder=tiny_encoder)
    assert not any((tmp_path / "out").iterdir())


def test_ivf_index_trains_and_stores_nprobe(tmp_path, tiny_encoder) -> None:
    texts = [f"document number {i} about topic {i % 17}" for i in range(400)]
    path = tmp_path / "many.jsonl"
    path.write_text(
        "".join(json.dumps({"doc_id": i, "text": t}) + "\n" for i, t in enumerate(texts))
    )
    folder = build_index(
        _options(path, tmp_path, index="ivf", shard_rows=128), encoder=tiny_encoder
    )
    manifest = folder.manifest()
    assert manifest.index.factory.startswith("IVF") and manifest.rows == 400
    assert folder.read_index(manifest).nprobe == manifest.index.search_params["nprobe"]


def test_interrupted_build_resumes_from_its_shards(
    corpus_file, tmp_path, tiny_encoder, monkeypatch
) -> None:
    calls = []
    original = tiny_encoder.encode

    def interrupting_encode(texts, **kwargs):
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(texts, **kwargs)

    monkeypatch.setattr(tiny_encoder, "encode", interrupting_encode)
    options = _options(corpus_file, tmp_path / "out", shard_rows=4)
    with pytest.raises(KeyboardInterrupt):
        build_index(options, encoder=tiny_encoder)
    partial = tmp_path / "out" / ".docs.partial"
    assert (
        len(list((partial / "shards").glob("*.npy"))) == 2
        and not (tmp_path / "out" / "docs").exists()
    )

    calls.clear()
    monkeypatch.setattr(
        tiny_encoder,
        "encode",
        lambda texts, **kw: (calls.append(len(texts)), original(texts, **kw))[1],
    )
    folder = build_index(options, encoder=tiny_encoder)
    assert calls == [4]  # only the third shard was encoded again
    assert not partial.exists()
    reference = build_index(_options(corpus_file, tmp_path / "ref"), encoder=tiny_encoder)
    ours, theirs = (IndexFolder(f.path).read_index(f.manifest()) for f in (folder, reference))
    np.testing.assert_allclose(
        ours.reconstruct_n(0, ours.ntotal), theirs.reconstruct_n(0, theirs.ntotal), atol=1e-6
    )


def test_resume_state_from_another_build_is_discarded(corpus_file, tmp_path, tiny_encoder) -> None:
    partial = tmp_path / ".docs.partial"
    (partial / "shards").mkdir(parents=True)
    np.save(partial / "shards" / "000000.npy", np.zeros((3, 32), dtype=np.float32))
    (partial / "build_state.json").write_text('{"source_sha256": "other"}')
    folder = build_index(_options(corpus_file, tmp_path), encoder=tiny_encoder)
    assert folder.manifest().rows == 12


def test_an_index_over_the_memory_budget_is_refused_before_encoding(
    corpus_file, tmp_path, tiny_encoder, monkeypatch
) -> None:
    monkeypatch.setattr(
        tiny_encoder, "encode", lambda *a, **k: pytest.fail("encoded before refusing")
    )
    with pytest.raises(SemsearchError, match="memory budget"):
        build_index(
            _options(corpus_file, tmp_path, index="flat", memory_budget=64), encoder=tiny_encoder
        )
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())
