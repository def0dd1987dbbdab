"""The one exact k-NN: parts streamed in turn, tiles over queries and base, ties to the lower
position, and a device out of memory that halves the tiles instead of failing (injected
into the score computation, as on a full GPU)."""

from __future__ import annotations

import logging

import faiss
import numpy as np
import pytest
import torch

from semsearch.ann import devices, exact
from semsearch.ann.exact import ExactSearch, Tiles, exact_knn
from semsearch.ann.vector_index import METRICS, prepare_vectors
from semsearch.errors import SemsearchError


def _points(rows: int, dimension: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(rows, dimension)).astype(np.float32)


def test_parts_streamed_in_turn_give_the_brute_force_neighbours_with_their_ids() -> None:
    vectors = prepare_vectors(_points(1000), "cosine")
    queries = vectors[:50]
    ids = np.arange(1000) + 5000  # ids travel with their vectors
    cuts = [(0, 300), (300, 650), (650, 1000)]
    scores, found = exact_knn(queries, [(ids[a:b], vectors[a:b]) for a, b in cuts], 5, "cosine")
    similarity = queries @ vectors.T
    brute = np.argsort(-similarity, axis=1)[:, :5]
    assert np.array_equal(found, brute + 5000)
    assert np.allclose(scores, np.take_along_axis(similarity, brute, axis=1), atol=1e-5)


def test_euclidean_keeps_the_smallest_distances_and_skips_empty_parts() -> None:
    vectors, queries = _points(400, seed=1), _points(20, seed=2)
    empty = (np.empty(0, dtype=np.int64), np.empty((0, 16), dtype=np.float32))
    parts = [empty, (np.arange(200), vectors[:200]), empty, (np.arange(200, 400), vectors[200:])]
    distances, found = exact_knn(queries, parts, 3, "l2")
    brute = ((queries[:, None, :] - vectors[None, :, :]) ** 2).sum(axis=2)
    assert np.array_equal(found, np.argsort(brute, axis=1)[:, :3])
    assert np.all(np.diff(distances, axis=1) >= 0)


def test_a_part_smaller_than_k_fills_the_rest_with_minus_one() -> None:
    vectors = prepare_vectors(_points(3), "cosine")
    scores, found = exact_knn(vectors, [(np.array([7, 8, 9]), vectors)], 5, "cosine")
    assert found[:, 0].tolist() == [7, 8, 9]  # each vector is its own nearest
    assert all(sorted(row) == [7, 8, 9] for row in found[:, :3].tolist())
    assert (found[:, 3:] == -1).all()
    assert scores[:, 0] == pytest.approx(1.0, abs=1e-5)


def _tight(monkeypatch, most_entries: int) -> list[tuple[int, int]]:
    """Score tiles of more than `most_entries` fail like a full GPU; every tile's shape is kept."""
    shapes = []
    real = exact.nearness

    def nearness(queries, base, metric):
        shapes.append((len(queries), len(base)))
        if len(queries) * len(base) > most_entries:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(queries, base, metric)

    monkeypatch.setattr(exact, "nearness", nearness)
    return shapes


@pytest.mark.parametrize("metric", ["cosine", "l2", "manhattan"])
def test_small_tiles_give_the_one_tile_answer_with_ties_to_the_lower_position(
    monkeypatch, metric
) -> None:
    vectors = prepare_vectors(_points(300, seed=3), metric)
    vectors[150:160] = vectors[5]  # ten copies of row 5: ties across tiles and at the k-th place
    expected = ExactSearch(vectors, metric).search(vectors[:40], 8)
    monkeypatch.setattr(devices, "CPU_TILE_BYTES", 7 * 64 * exact.BYTES_PER_SCORE[metric])
    tiled = ExactSearch(vectors, metric)
    scores, found = tiled.search(vectors[:40], 8)
    assert Tiles.fitting(devices.tile_bytes(tiled.device), 40, 300, metric) == Tiles(40, 11)
    np.testing.assert_array_equal(found, expected[1])
    np.testing.assert_allclose(scores, expected[0], atol=1e-5)
    assert found[5].tolist() == [5, *range(150, 157)]  # the copies, lower positions first


def test_an_out_of_memory_halves_the_tiles_once_and_never_fails(monkeypatch, caplog) -> None:
    vectors = prepare_vectors(_points(500, seed=4), "cosine")
    expected = ExactSearch(vectors, "cosine").search(vectors, 5)
    shapes = _tight(monkeypatch, most_entries=20_000)
    search = ExactSearch(vectors, "cosine")
    with caplog.at_level(logging.WARNING, logger="semsearch.ann.exact"):
        first = search.search(vectors[:250], 5)
        second = search.search(vectors[250:], 5)
    np.testing.assert_array_equal(np.concatenate([first[1], second[1]]), expected[1])
    failed = [rows * base for rows, base in shapes if rows * base > 20_000]
    assert len(failed) <= 4  # the first tiles only: later ones keep the size that fitted
    assert search.tiles is not None and search.tiles.queries * search.tiles.base <= 20_000
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and "ran out of memory" in warnings[0]


def test_a_cuda_tile_is_sized_from_free_memory(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 << 30, 80 << 30))
    budget = devices.tile_bytes(torch.device("cuda:0"))
    assert budget == 4 << 30
    tiles = Tiles.fitting(budget, 1_000_000, 841_708, "cosine")
    assert tiles.queries == exact.QUERY_TILE and tiles.base > 80_000
    assert tiles.queries * tiles.base * exact.BYTES_PER_SCORE["cosine"] <= budget


def test_a_row_that_never_fits_on_the_cpu_is_one_clear_error(monkeypatch) -> None:
    _tight(monkeypatch, most_entries=0)
    with pytest.raises(SemsearchError, match="one row"):
        ExactSearch(_points(10), "dot").search(_points(2), 3)


@pytest.mark.parametrize("metric", ["cosine", "l2", "manhattan"])
def test_the_exact_knn_equals_faiss_flat(metric) -> None:
    vectors = prepare_vectors(_points(3_000, seed=4), "cosine")
    parts = [(np.arange(0, 1_000), vectors[:1_000]), (np.arange(1_000, 3_000), vectors[1_000:])]
    queries = prepare_vectors(vectors[:64], metric)
    flat = faiss.IndexFlat(queries.shape[1], METRICS[metric])
    flat.add(prepare_vectors(vectors, metric))
    faiss_scores, faiss_ids = flat.search(queries, 10)
    torch_scores, torch_ids = exact_knn(queries, parts, 10, metric, "cpu")
    assert np.mean(faiss_ids == torch_ids) >= 0.99  # ties may swap
    np.testing.assert_allclose(torch_scores, faiss_scores, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch alone)")
@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_on_a_gpu_the_base_stays_there_and_answers_as_on_the_cpu(metric) -> None:
    vectors = prepare_vectors(_points(20_000, dimension=64, seed=5), metric)
    on_gpu = ExactSearch(vectors, metric, "cuda")
    assert on_gpu.base.is_cuda  # placed once, for every search after
    gpu_scores, gpu_found = on_gpu.search(vectors[:500], 10)
    cpu_scores, cpu_found = ExactSearch(vectors, metric).search(vectors[:500], 10)
    assert np.mean(gpu_found == cpu_found) >= 0.99  # ties and rounding may swap
    np.testing.assert_allclose(gpu_scores, cpu_scores, rtol=1e-3, atol=1e-3)
