"""Exact k-NN over vectors streamed in parts: the ground truth of tuning and the mining search."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.index.exact_search import exact_knn
from semsearch.index.vector_index import prepare_vectors


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
