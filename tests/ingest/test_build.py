"""Building an index folder: contents, atomicity, overwrite and resume."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from recording_bar import recording_bar

from semsearch.ann.vector_index import prepare_vectors
from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.store.folders import IndexFolder
from semsearch.store.segment import ID_COLUMN, TEXT_HASH_COLUMN, Segment


def _options(corpus, out_dir, **changes) -> BuildOptions:
    changes = {"name": "docs", **changes}
    return BuildOptions(
        corpus=corpus, id_column="doc_id", out_dir=out_dir, show_progress=False, **changes
    )


def _only_segment(folder: IndexFolder) -> Segment:
    (record,) = folder.manifest().segments
    return Segment(folder.segment_dir(record.name), record)


def test_folder_holds_a_segment_and_the_first_generation(
    corpus_file, tmp_path, tiny_encoder, sentences
) -> None:
    folder = build_index(_options(corpus_file, tmp_path), encoder=tiny_encoder)
    assert sorted(p.name for p in folder.path.iterdir()) == [
        "generations",
        "manifest.json",
        "segments",
    ]
    assert [p.name for p in (folder.path / "generations").iterdir()] == ["g000001.json"]
    manifest = folder.manifest()
    assert manifest.generation == 1 and manifest.operation["kind"] == "build"
    assert manifest.rows == len(sentences) and manifest.next_id == len(sentences)
    assert manifest.index.factory == "Flat" and manifest.index.metric == "cosine"
    assert manifest.index.trained_file is None  # a flat index needs no training
    assert manifest.model.fingerprint == tiny_encoder.fingerprint
    assert manifest.source.id_column == "doc_id" and len(manifest.source.sha256) == 64
    assert manifest.vector_dtype == "float32"
    segment = _only_segment(folder)
    assert sorted(p.name for p in segment.folder.iterdir()) == [
        "index-g000001.faiss",
        "lexical-g000001",  # the BM25 part (tests/store/test_lexical.py)
        "part-00000.arrow",  # the metadata again, memory-mapped by searches
        "part-00000.ids.npy",
        "part-00000.npy",
        "part-00000.parquet",
    ]
    metadata = segment.metadata()
    assert set(metadata.column_names) >= {"doc_id", "text", "topic", ID_COLUMN, TEXT_HASH_COLUMN}
    # At a first build, ids are the source rows, and position i of the metadata is id i.
    assert metadata.column(ID_COLUMN).to_pylist() == list(range(len(sentences)))
    assert np.concatenate(segment.part_ids).tolist() == list(range(len(sentences)))
    texts = metadata.column("text").to_pylist()
    assert texts == sentences
    vectors = tiny_encoder.encode(texts)
    np.testing.assert_allclose(segment.part_vectors(0), vectors, atol=1e-6)
    # Each text's own vector is its nearest neighbour, found under its own id.
    index = segment.read_index(manifest.index.metric)
    assert index.size == len(sentences)
    _, nearest = index.search(prepare_vectors(vectors, "cosine"), 1)
    assert nearest[:, 0].tolist() == list(range(len(sentences)))


def test_ids_skip_the_source_rows_that_were_not_indexed(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "gaps.parquet"
    pq.write_table(
        pa.table({"doc_id": ["a", "b", "c", "d"], "text": ["one", "", None, "four"]}), path
    )
    folder = build_index(_options(path, tmp_path / "out"), encoder=tiny_encoder)
    manifest = folder.manifest()
    assert (manifest.rows, manifest.source.rows_read, manifest.source.rows_skipped) == (2, 4, 2)
    assert manifest.next_id == 4  # ids are never given out twice, skipped rows included
    segment = _only_segment(folder)
    assert np.concatenate(segment.part_ids).tolist() == [0, 3]
    assert segment.metadata().column("doc_id").to_pylist() == ["a", "d"]


def test_vectors_can_be_stored_in_half_precision(corpus_file, tmp_path, tiny_encoder) -> None:
    folder = build_index(
        _options(corpus_file, tmp_path, store_vectors="fp16"), encoder=tiny_encoder
    )
    assert folder.manifest().vector_dtype == "float16"
    stored = _only_segment(folder).part_vectors(0)
    assert stored.dtype == np.float16
    texts = _only_segment(folder).metadata().column("text").to_pylist()
    np.testing.assert_allclose(stored, tiny_encoder.encode(texts), atol=1e-2)
    with pytest.raises(SemsearchError, match="--store-vectors"):
        build_index(
            _options(corpus_file, tmp_path / "other", store_vectors="int4"), encoder=tiny_encoder
        )


def test_existing_index_needs_overwrite(corpus_file, tmp_path, tiny_encoder) -> None:
    build_index(_options(corpus_file, tmp_path), encoder=tiny_encoder)
    with pytest.raises(SemsearchError, match="already exists.*--overwrite"):
        build_index(_options(corpus_file, tmp_path), encoder=tiny_encoder)
    folder = build_index(
        _options(corpus_file, tmp_path, overwrite=True, index="hnsw"), encoder=tiny_encoder
    )
    assert folder.manifest().index.factory.startswith("HNSW")
    assert folder.manifest().generation == 1
    assert [p.name for p in tmp_path.iterdir() if p.name != "corpus.parquet"] == ["docs"]


def test_bad_input_leaves_no_folder(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "dup.parquet"
    pq.write_table(pa.table({"doc_id": ["a", "b", "a"], "text": ["x", "y", "z"]}), path)
    with pytest.raises(SemsearchError, match="more than once"):
        build_index(_options(path, tmp_path / "out", part_rows=1), encoder=tiny_encoder)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_corpus_with_only_empty_texts_is_refused(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(
        pa.table(
            {"doc_id": ["a", "b"], "text": ["", None]},
            schema=pa.schema([("doc_id", pa.string()), ("text", pa.string())]),
        ),
        path,
    )
    with pytest.raises(SemsearchError, match="nothing to index"):
        build_index(_options(path, tmp_path / "out"), encoder=tiny_encoder)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_ivf_index_trains_and_records_nprobe(tmp_path, tiny_encoder) -> None:
    texts = [f"document number {i} about topic {i % 17}" for i in range(400)]
    path = tmp_path / "many.jsonl"
    path.write_text(
        "".join(json.dumps({"doc_id": i, "text": t}) + "\n" for i, t in enumerate(texts))
    )
    folder = build_index(_options(path, tmp_path, index="ivf", part_rows=128), encoder=tiny_encoder)
    manifest = folder.manifest()
    assert manifest.index.factory.startswith("IVF") and manifest.rows == 400
    (record,) = manifest.segments
    assert (record.rows, record.parts) == (400, 4)
    # The trained, empty structure is kept, so that segments added later share its centroids.
    assert manifest.index.trained_file is not None
    assert folder.trained_path(manifest.index.trained_file).is_file()
    index = _only_segment(folder).read_index(manifest.index.metric)
    assert index.is_trained and index.size == 400 and index.tunable_parameter() == "nprobe"
    # nprobe lives in the manifest and is passed with each search, within the index's lists.
    nprobe = manifest.index.search_params["nprobe"]
    assert 1 <= nprobe <= index.parameter_ceiling()
    assert manifest.tuning is not None and manifest.tuning["value"] == nprobe
    queries = prepare_vectors(tiny_encoder.encode(texts[:3]), "cosine")
    _, nearest = index.search(queries, 1, manifest.index.search_params)
    assert nearest[:, 0].tolist() == [0, 1, 2]


def test_interrupted_build_resumes_from_its_parts(
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
    options = _options(corpus_file, tmp_path / "out", part_rows=4)
    with pytest.raises(KeyboardInterrupt):
        build_index(options, encoder=tiny_encoder)
    partial = tmp_path / "out" / ".docs.partial"
    complete_parts = list((partial / "segments" / "s000000").glob("part-?????.npy"))
    assert len(complete_parts) == 2 and not (tmp_path / "out" / "docs").exists()

    calls.clear()
    monkeypatch.setattr(
        tiny_encoder,
        "encode",
        lambda texts, **kw: (calls.append(len(texts)), original(texts, **kw))[1],
    )
    folder = build_index(options, encoder=tiny_encoder)
    assert calls == [4]  # only the third part was encoded again
    assert not partial.exists()
    assert folder.manifest().segments[0].parts == 3
    reference = build_index(_options(corpus_file, tmp_path / "ref"), encoder=tiny_encoder)
    ours, theirs = _only_segment(folder), _only_segment(reference)
    assert (
        np.concatenate(ours.part_ids).tolist()
        == np.concatenate(theirs.part_ids).tolist()
        == list(range(12))
    )
    np.testing.assert_allclose(
        ours.vectors_at(np.arange(12)), theirs.vectors_at(np.arange(12)), atol=1e-6
    )
    assert ours.metadata().equals(theirs.metadata())
    assert ours.read_index("cosine").size == theirs.read_index("cosine").size == 12


def test_resume_state_from_another_build_is_discarded(corpus_file, tmp_path, tiny_encoder) -> None:
    partial = tmp_path / ".docs.partial"
    stale = partial / "segments" / "s000000"
    stale.mkdir(parents=True)
    np.save(stale / "part-00000.npy", np.zeros((3, 32), dtype=np.float32))
    np.save(stale / "part-00000.ids.npy", np.arange(3, dtype=np.int64))
    (partial / "build_state.json").write_text('{"source_sha256": "other"}')
    folder = build_index(_options(corpus_file, tmp_path), encoder=tiny_encoder)
    assert folder.manifest().rows == 12
    stored = _only_segment(folder).vectors_at(np.arange(12))
    assert np.all(np.linalg.norm(stored, axis=1) > 0)  # none of the stale zero vectors


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


def test_a_crash_that_is_not_an_interrupt_leaves_no_partial_folder(
    corpus_file, tmp_path, tiny_encoder, monkeypatch
) -> None:
    original = tiny_encoder.encode
    calls = []

    def crashing_encode(texts, **kwargs):
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("a bug, not an interrupt")
        return original(texts, **kwargs)

    monkeypatch.setattr(tiny_encoder, "encode", crashing_encode)
    with pytest.raises(RuntimeError):
        build_index(_options(corpus_file, tmp_path / "out", part_rows=4), encoder=tiny_encoder)
    assert list((tmp_path / "out").iterdir()) == []  # no hidden .docs.partial to resume


def test_a_reserved_column_is_refused_before_encoding(tmp_path, tiny_encoder, monkeypatch) -> None:
    monkeypatch.setattr(tiny_encoder, "encode", lambda *a, **k: pytest.fail("encoded first"))
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["x"], ID_COLUMN: [7]}), path)
    with pytest.raises(SemsearchError, match=f"column named '{ID_COLUMN}'"):
        build_index(_options(path, tmp_path / "out"), encoder=tiny_encoder)
    assert not (tmp_path / "out").exists()


def _texts(tmp_path, rows: int):
    path = tmp_path / "t.csv"
    path.write_text("doc_id,text\n" + "".join(f"d{i},text number {i}\n" for i in range(rows)))
    return path


def test_ivfpq_on_too_few_rows_for_its_codebooks_builds_flat_and_says_so(
    tmp_path, tiny_encoder, caplog
) -> None:
    folder = build_index(
        _options(_texts(tmp_path, 40), tmp_path / "out", index="ivfpq"), encoder=tiny_encoder
    )
    spec = folder.manifest().index
    assert (spec.requested, spec.factory, spec.search_params) == ("ivfpq", "Flat", {})
    assert "needs at least 256 vectors to train and there are 40" in caplog.text


def test_a_one_row_hnsw_index_keeps_its_default_and_is_not_tuned(tmp_path, tiny_encoder) -> None:
    folder = build_index(
        _options(_texts(tmp_path, 1), tmp_path / "out", index="hnsw"), encoder=tiny_encoder
    )
    manifest = folder.manifest()
    assert manifest.tuning is None and manifest.index.search_params == {"efSearch": 64}


def test_a_four_row_ivf_index_is_tuned_over_the_rows_it_has(tmp_path, tiny_encoder) -> None:
    folder = build_index(
        _options(_texts(tmp_path, 4), tmp_path / "out", index="ivf"), encoder=tiny_encoder
    )
    tuning = folder.manifest().tuning
    assert tuning["met"] and tuning["k"] == 3 and tuning["recall"] == 1.0


def test_an_out_dir_that_cannot_be_made_is_one_error(corpus_file, tmp_path, tiny_encoder) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(SemsearchError, match="cannot write the index into .*--out-dir"):
        build_index(_options(corpus_file, tmp_path / "a-file" / "indexes"), encoder=tiny_encoder)


@pytest.mark.parametrize("name", ["", "x" * 300, "🙂" * 100, ".hidden", "a/b"])
def test_unusable_names_are_refused(corpus_file, tmp_path, tiny_encoder, name) -> None:
    with pytest.raises(SemsearchError, match="is not usable"):
        build_index(_options(corpus_file, tmp_path / "out", name=name), encoder=tiny_encoder)
    assert not (tmp_path / "out").exists()


def test_running_out_of_memory_keeps_the_partial_folder_to_resume_from(
    corpus_file, tmp_path, tiny_encoder, monkeypatch, caplog
) -> None:
    original = tiny_encoder.encode
    calls = []

    def exhausted_encode(texts, **kwargs):
        calls.append(len(texts))
        if len(calls) == 2:
            raise MemoryError
        return original(texts, **kwargs)

    monkeypatch.setattr(tiny_encoder, "encode", exhausted_encode)
    options = _options(corpus_file, tmp_path / "out", part_rows=4)
    with pytest.raises(MemoryError):
        build_index(options, encoder=tiny_encoder)
    assert (tmp_path / "out" / ".docs.partial").is_dir()
    assert "MemoryError: 4 of 12 texts are encoded and kept" in caplog.text
    assert "run the same command again to resume" in caplog.text
    monkeypatch.setattr(tiny_encoder, "encode", original)
    assert build_index(options, encoder=tiny_encoder).manifest().rows == 12


def _hundred_rows(tmp_path) -> Path:
    path = tmp_path / "hundred.parquet"
    texts = [
        f"text number {i} about {['cats', 'dogs', 'birds', 'fish'][i % 4]}" for i in range(100)
    ]
    pq.write_table(pa.table({"doc_id": [f"d{i}" for i in range(100)], "text": texts}), path)
    return path


@pytest.mark.parametrize("depth", [1, 3])
def test_the_pipelined_build_equals_the_sequential_one(tmp_path, tiny_encoder, depth) -> None:
    corpus = _hundred_rows(tmp_path)
    built = {}
    for name, stages in (("sequential", 0), ("pipelined", depth)):
        options = _options(
            corpus, tmp_path / name, part_rows=16, batch_size=8, pipeline_depth=stages
        )
        built[name] = _only_segment(build_index(options, encoder=tiny_encoder))
    ours, theirs = built["pipelined"], built["sequential"]
    assert ours.record.parts == theirs.record.parts == 7
    assert (
        np.concatenate(ours.part_ids).tolist()
        == np.concatenate(theirs.part_ids).tolist()
        == list(range(100))
    )
    np.testing.assert_allclose(
        ours.vectors_at(np.arange(100)), theirs.vectors_at(np.arange(100)), atol=1e-6
    )
    assert ours.metadata().equals(theirs.metadata())


@pytest.mark.parametrize("stage", ["read", "encode", "write"])
def test_a_failing_stage_is_raised_once_and_leaves_nothing_written(
    tmp_path, tiny_encoder, monkeypatch, stage
) -> None:
    import semsearch.ingest.parts as parts_module
    from semsearch.store.segment import SegmentWriter

    calls = []

    def failing(original):
        def wrapper(*args, **kwargs):
            calls.append(1)
            if len(calls) == 3:
                raise ValueError(f"the {stage} stage broke")
            return original(*args, **kwargs)

        return wrapper

    if stage == "read":
        monkeypatch.setattr(parts_module, "prepare_part", failing(parts_module.prepare_part))
    elif stage == "encode":
        monkeypatch.setattr(tiny_encoder, "encode", failing(tiny_encoder.encode))
    else:
        monkeypatch.setattr(SegmentWriter, "write", failing(SegmentWriter.write))
    options = _options(_hundred_rows(tmp_path), tmp_path / "out", part_rows=16)
    with pytest.raises(ValueError, match=f"^the {stage} stage broke$"):
        build_index(options, encoder=tiny_encoder)
    assert list((tmp_path / "out").iterdir()) == []  # neither the index nor a partial folder
    assert not [t for t in threading.enumerate() if t.name.startswith("semsearch-")]


def test_build_progress_moves_with_every_batch(tmp_path, tiny_encoder, monkeypatch) -> None:
    import semsearch.ingest.parts as parts_module

    Bar = recording_bar()
    monkeypatch.setattr(parts_module, "tqdm", Bar)
    build_index(_options(_hundred_rows(tmp_path), tmp_path, batch_size=16), encoder=tiny_encoder)
    assert sum(Bar.updates) == 100 and len(Bar.updates) >= 100 // 16  # one part, many moves
    assert max(Bar.updates) <= 16
    # The rate (and ETA) averages over seconds, not over the last batch or two.
    assert Bar.opened[0]["smoothing"] <= 0.1


def test_a_resumed_build_s_rate_counts_only_the_texts_it_encodes(
    corpus_file, tmp_path, tiny_encoder, monkeypatch
) -> None:
    """The bar of a resumed build counted the parts it found as encoded, at once: a rate of
    thousands of texts/s and an ETA to match."""
    import semsearch.ingest.parts as parts_module

    original, calls = tiny_encoder.encode, []

    def interrupting_encode(texts, **kwargs):
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(texts, **kwargs)

    monkeypatch.setattr(tiny_encoder, "encode", interrupting_encode)
    options = _options(corpus_file, tmp_path / "out", part_rows=4)
    with pytest.raises(KeyboardInterrupt):
        build_index(options, encoder=tiny_encoder)  # two parts of 4 rows written
    monkeypatch.setattr(tiny_encoder, "encode", original)
    Bar = recording_bar()
    monkeypatch.setattr(parts_module, "tqdm", Bar)
    build_index(options, encoder=tiny_encoder)
    assert Bar.opened[0]["total"] == 12 and Bar.opened[0]["initial"] == 8
    assert sum(Bar.updates) == 4  # tqdm's rate is (n - initial) / elapsed


def test_a_build_says_which_model_it_loads_before_loading_it(
    corpus_file, tmp_path, tiny_model_dir, monkeypatch, caplog
) -> None:
    """The bar sat at 0 for the seconds the model took to load, with no word of why."""
    from semsearch.models.bi_encoder import BiEncoder

    said_before_loading: list[str] = []
    load = BiEncoder.load

    def recording_load(*args, **kwargs):
        said_before_loading.extend(record.getMessage() for record in caplog.records)
        return load(*args, **kwargs)

    monkeypatch.setattr(BiEncoder, "load", recording_load)
    with caplog.at_level(logging.WARNING, logger="semsearch.ingest.build"):
        options = replace(
            _options(corpus_file, tmp_path, model=str(tiny_model_dir), device="cpu"),
            show_progress=True,
        )
        build_index(options)
    assert f"loading model {tiny_model_dir} on cpu" in said_before_loading
