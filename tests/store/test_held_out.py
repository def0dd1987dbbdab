"""Tuning on rows kept out of the structure: the recall it claims holds on unseen queries."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from semsearch.ingest.maintain import reindex, retune
from semsearch.search.searcher import Searcher
from semsearch.store.segment import Segment
from tests.io.test_own_vectors import build, vector_corpus

ROWS, DIMENSION, CENTRES = 4_000, 64, 40


def draw(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    """Rows around the centres: queries drawn the same way lie near corpus rows, not on them."""
    vectors = centres[rng.integers(0, len(centres), count)]
    return (vectors + 0.8 * rng.normal(size=vectors.shape)).astype(np.float32)


@pytest.fixture(scope="module")
def clustered() -> tuple[np.ndarray, np.ndarray]:
    """A corpus and 300 other queries from the same source."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(CENTRES, DIMENSION))
    return draw(rng, centres, ROWS), draw(rng, centres, 300)


def held_out_recall(folder, corpus: np.ndarray, queries: np.ndarray) -> float:
    """recall@10 of the index's tuned search on `queries`, against exact cosine search."""
    unit = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    truth = np.argsort(-(queries @ unit.T), axis=1)[:, :10]
    found = Searcher(folder).search_vectors(queries, k=10)
    rows = [[int(hit.id[1:]) for hit in hits] for hits in found]
    return float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(rows, truth)]))


@pytest.fixture(scope="module")
def hnsw(tmp_path_factory, clustered):
    tmp = tmp_path_factory.mktemp("held")
    corpus = vector_corpus(tmp / "c.parquet", clustered[0])
    return build(corpus, tmp / "idx", index="hnsw", target_recall=0.99, lexical=None)


def test_a_graph_tuned_by_default_holds_its_target_on_queries_it_has_not_seen(
    hnsw, clustered
) -> None:
    # Before: efSearch was tuned on corpus rows, nodes of the graph its search walks
    # straight to: recall 0.99 claimed at efSearch 12, 0.967 on queries from the same source.
    tuning = hnsw.manifest().tuning
    assert tuning["met"] and tuning["recall"] >= 0.99
    assert held_out_recall(hnsw, *clustered) >= 0.99 - 0.01


def test_the_sample_is_recorded_kept_out_of_the_graph_and_still_found(hnsw, clustered) -> None:
    manifest = hnsw.manifest()
    record = manifest.segments[0]
    held = np.array(record.held_out)
    assert len(held) == ROWS // 10 and len(set(held.tolist())) == len(held)
    graph = Segment(hnsw.segment_dir(record.name), record).read_index("cosine").source
    assert graph.size == ROWS - len(held)  # out of the graph ...
    hits = Searcher(hnsw).search_vectors(clustered[0][held[:50]], k=1)
    assert [hit[0].id for hit in hits] == [f"k{row}" for row in held[:50]]  # ... still found
    stored = json.loads((hnsw.path / "manifest.json").read_text())
    assert stored["segments"][0]["held_out"] == held.tolist()


def test_a_later_tune_without_queries_uses_the_same_held_out_rows(hnsw, caplog) -> None:
    held = hnsw.manifest().segments[0].held_out
    with caplog.at_level(logging.WARNING):
        result = retune(hnsw, 0.99)
    assert result.queries == len(held) and result.met
    assert "over-claim" not in caplog.text
    assert hnsw.manifest().segments[0].held_out == held


def test_a_reindex_to_an_exact_index_keeps_nothing_out(tmp_path, clustered) -> None:
    corpus = vector_corpus(tmp_path / "c.parquet", clustered[0][:500])
    folder = build(corpus, tmp_path / "idx", index="ivf", target_recall=0.9, lexical=None)
    assert len(folder.manifest().segments[0].held_out) == 50
    manifest = reindex(folder, "flat")
    assert manifest.segments[0].held_out == ()
    assert len(Searcher(folder).search_vectors(clustered[0][:3], k=500)[0]) == 500


def as_written_before(folder, requested: str | None = None) -> None:
    """Make the folder's manifests what semsearch wrote before held-out tuning: no `held_out`
    in a segment's record (and an `ivfpq` index named as such over plain IVF-PQ codes)."""
    from semsearch.store.manifest import CHECKSUM_KEY, content_digest

    for path in [folder.path / "manifest.json", *folder.path.glob("generations/*.json")]:
        data = json.loads(path.read_text())
        data.pop(CHECKSUM_KEY)
        for segment in data["segments"]:
            assert segment.pop("held_out") == []
        if requested is not None:
            data["index"]["requested"] = requested
        data[CHECKSUM_KEY] = content_digest(data)
        path.write_text(json.dumps(data, indent=2) + "\n")


def test_indexes_built_before_keep_opening_and_say_what_their_tuning_is_worth(
    tmp_path, clustered, caplog
) -> None:
    corpus = vector_corpus(tmp_path / "c.parquet", clustered[0][:1000])
    graph = build(corpus, tmp_path / "g", index="hnsw", target_recall=None, lexical=None)
    codes = build(corpus, tmp_path / "p", index="IVF8,PQ8x8", target_recall=None, lexical=None)
    as_written_before(graph)
    as_written_before(codes, requested="ivfpq")  # what `ivfpq` built before it was `disk`
    for folder in (graph, codes):
        hits = Searcher(folder).search_vectors(clustered[1][:5], k=10)
        assert [len(line) for line in hits] == [10] * 5
    assert codes.manifest().index.search_params == {"nprobe": 32}  # no re-scoring added
    with caplog.at_level(logging.WARNING):
        result = retune(graph, 0.9, sample=100)
    assert result.queries == 100 and "over-claim recall" in caplog.text


def test_a_change_that_churns_past_the_tuned_rows_says_which_command_retunes(
    tmp_path, clustered, caplog
) -> None:
    from semsearch.ingest.maintain import compact
    from semsearch.ingest.update import add_rows, delete_rows

    vectors = clustered[0]
    corpus = vector_corpus(tmp_path / "c.parquet", vectors[:400])
    folder = build(corpus, tmp_path / "idx", index="ivf", target_recall=0.9, lexical=None)
    with caplog.at_level(logging.WARNING):
        add_rows(folder, vector_corpus(tmp_path / "a.parquet", vectors[400:700], first_id=400))
        assert "semsearch compact" not in caplog.text  # 300 of 400 rows changed
        delete_rows(folder, ids=[f"k{row}" for row in range(100)])  # 400 of 400
        assert caplog.text.count("'semsearch compact c'") == 1
        delete_rows(folder, ids=["k100"])
        assert caplog.text.count("'semsearch compact c'") == 1  # once, as it crosses
    manifest = compact(folder)
    assert len(manifest.segments) == 1 and len(manifest.segments[0].held_out) == 59
    assert manifest.tuning["met"]
