"""The `disk` index type: codes memory-mapped from the file, top-k re-scored from stored vectors."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from semsearch.ann.factory import choose_index
from semsearch.ann.vector_index import VectorIndex
from semsearch.errors import SemsearchError
from semsearch.ingest.maintain import retune
from semsearch.ingest.update import delete_rows
from semsearch.search.searcher import Searcher
from semsearch.store.segment import Segment
from tests.io.test_own_vectors import build, vector_corpus

ROWS, DIMENSION = 3_000, 32


@pytest.fixture(scope="module")
def clustered() -> np.ndarray:
    """Vectors around 60 centres: neighbourhoods an IVF-PQ structure can find."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(60, DIMENSION))
    vectors = centres[rng.integers(0, 60, ROWS)] + 0.4 * rng.normal(size=(ROWS, DIMENSION))
    return vectors.astype(np.float32)


@pytest.fixture()
def disk_index(tmp_path: Path, clustered: np.ndarray):
    corpus = vector_corpus(tmp_path / "c.parquet", clustered)
    return build(corpus, tmp_path / "idx", index="disk", target_recall=None, lexical=None)


def queries(count: int = 20) -> np.ndarray:
    return np.random.default_rng(7).normal(size=(count, DIMENSION)).astype(np.float32)


def exact(base: np.ndarray, query: np.ndarray, allowed: np.ndarray | None = None):
    """Cosine scores of every row and the exact top-10 rows (among `allowed`)."""
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    scores = unit @ (query / np.linalg.norm(query))
    ranked = np.argsort(-np.where(allowed if allowed is not None else True, scores, -9))
    return scores, ranked[:10]


def rows_of(hits) -> list[int]:
    return [int(hit.id[1:]) for hit in hits]


def test_disk_is_ivf_pq_with_an_oversampling_parameter(disk_index) -> None:
    spec = disk_index.manifest().index
    assert spec.requested == "disk" and ",PQ" in spec.factory and spec.factory.startswith("IVF")
    assert set(spec.search_params) == {"nprobe", "oversample"}


def test_rescoring_returns_exact_scores(disk_index, clustered) -> None:
    for query, hits in zip(queries(), Searcher(disk_index).search_vectors(queries(), k=10)):
        scores, _ = exact(clustered, query)
        assert len(hits) == 10
        found = np.array([hit.score for hit in hits])
        np.testing.assert_allclose(found, scores[rows_of(hits)], atol=1e-5)
        assert np.all(np.diff(found) <= 1e-6)  # ranked by the exact scores


def test_enough_oversampling_finds_the_exact_top_k(disk_index, clustered) -> None:
    searcher = Searcher(disk_index)
    few = searcher.search_vectors(queries(), k=10, nprobe=1, oversample=1)
    every = searcher.search_vectors(queries(), k=10, nprobe=10_000, oversample=256)
    truth = [exact(clustered, query)[1].tolist() for query in queries()]
    assert [rows_of(hits) for hits in every] == truth
    assert [rows_of(hits) for hits in few] != truth  # the codes alone do miss some
    assert "nprobe" in " ".join(every.notes)  # clamped to the lists there are


def test_mapped_lists_answer_as_lists_in_memory(disk_index) -> None:
    manifest = disk_index.manifest()
    record = manifest.segments[0]
    path = disk_index.segment_dir(record.name) / record.index_file
    mapped = VectorIndex.read(path, "cosine", mapped=True)
    loaded = VectorIndex.read(path, "cosine")
    lists = faiss.downcast_InvertedLists(faiss.extract_index_ivf(mapped.faiss).invlists)
    assert isinstance(lists, faiss.OnDiskInvertedLists)  # the codes stay in the file
    prepared = queries() / np.linalg.norm(queries(), axis=1, keepdims=True)
    for a, b in zip(
        mapped.search(prepared, 40, {"nprobe": 8}), loaded.search(prepared, 40, {"nprobe": 8})
    ):
        np.testing.assert_array_equal(a, b)
    assert (
        Segment(disk_index.segment_dir(record.name), record).read_index("cosine", mapped=True).size
        == ROWS
    )


def test_vectors_mapped_for_random_reads_are_the_stored_ones(disk_index) -> None:
    record = disk_index.manifest().segments[0]
    segment = Segment(disk_index.segment_dir(record.name), record)
    for part in range(record.parts):
        stored, mapped = segment.part_vectors(part), segment.part_vectors_for_random_reads(part)
        assert mapped.dtype == stored.dtype and mapped.shape == stored.shape
        np.testing.assert_array_equal(mapped, stored)
    path = segment.folder / "part-00000.npy"
    whole = path.read_bytes()
    for cut in (40, 200):  # in the header, in the data
        path.write_bytes(whole[:cut])
        with pytest.raises(SemsearchError, match="cannot be read"):
            segment.part_vectors_for_random_reads(0)


def test_deleted_rows_and_filters_hold(disk_index, clustered) -> None:
    query = queries(1)[0]
    _, before = exact(clustered, query)
    delete_rows(disk_index, ids=[f"k{row}" for row in before[:3]])
    alive = np.ones(ROWS, bool)
    alive[before[:3]] = False
    searcher = Searcher(disk_index)
    [hits] = searcher.search_vectors(query, k=10, nprobe=10_000, oversample=64)
    assert rows_of(hits) == exact(clustered, query, alive)[1].tolist()
    half = alive & (np.arange(ROWS) % 2 == 0)  # year = 2000 + row: even years
    [hits] = searcher.search_vectors(
        query, k=10, where="year % 2 = 0", nprobe=10_000, oversample=64
    )
    assert rows_of(hits) == exact(clustered, query, half)[1].tolist()


def test_a_changed_vector_part_is_refused(disk_index) -> None:
    record = disk_index.manifest().segments[0]
    part = disk_index.segment_dir(record.name) / "part-00000.npy"
    data = bytearray(part.read_bytes())
    data[-8:] = bytes(8)  # the same size, another vector
    part.write_bytes(bytes(data))
    with pytest.raises(SemsearchError, match="part-00000.npy"):
        Searcher(disk_index).search_vectors(queries(), k=10)


def test_auto_picks_disk_under_a_small_memory_budget(tmp_path, clustered) -> None:
    assert "oversample" not in choose_index("auto", ROWS, DIMENSION, "cosine").search_params
    spec = choose_index("auto", 841_708, 384, "cosine", memory_budget=300 * 2**20)
    assert "oversample" in spec.search_params and spec.factory == "IVF1024,PQ48x8np"
    corpus = vector_corpus(tmp_path / "c.parquet", clustered)
    folder = build(
        corpus, tmp_path / "idx", memory_budget=100_000, target_recall=None, lexical=None
    )
    assert "oversample" in folder.manifest().index.search_params
    assert len(Searcher(folder).search_vectors(queries(2), k=5)[0]) == 5


def test_tuning_sets_nprobe_and_oversample(tmp_path, clustered) -> None:
    corpus = vector_corpus(tmp_path / "c.parquet", clustered)
    folder = build(corpus, tmp_path / "idx", index="disk", target_recall=0.9, lexical=None)
    manifest = folder.manifest()
    params = manifest.index.search_params
    assert manifest.tuning["met"] and manifest.tuning["recall"] >= 0.9
    assert params == {"nprobe": manifest.tuning["value"], **manifest.tuning["also"]}
    result = retune(folder, 0.99)
    assert folder.manifest().index.search_params == result.search_params()
    assert result.recall >= 0.99 or not result.met
