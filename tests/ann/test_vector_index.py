"""`VectorIndex`: how a lone query is spread over FAISS's threads."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from semsearch.ann.factory import choose_index
from semsearch.ann.vector_index import VectorIndex, prepare_vectors


@pytest.fixture()
def two_threads():
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    yield
    faiss.omp_set_num_threads(before)


def _ivf() -> tuple[VectorIndex, np.ndarray]:
    rng = np.random.default_rng(3)
    vectors = prepare_vectors(rng.normal(size=(3000, 16)), "cosine")
    index = VectorIndex.create(choose_index("IVF32,Flat", 3000, 16, "cosine"), 16)
    index.train(vectors)
    index.add(vectors, np.arange(3000))
    return index, vectors


@pytest.mark.parametrize("policy", ["PASSIVE", ""])
def test_a_lone_query_shares_its_lists_only_where_threads_sleep(
    monkeypatch, two_threads, policy
) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    index, vectors = _ivf()
    queries = vectors[:40] + 0.1
    batch_scores, batch_ids = index.search(queries, 10, {"nprobe": 8})
    assert faiss.extract_index_ivf(index.faiss).parallel_mode == 0
    for row, query in enumerate(queries):
        scores, ids = index.search(query[None], 10, {"nprobe": 8})
        np.testing.assert_array_equal(ids[0], batch_ids[row])
        np.testing.assert_allclose(scores[0], batch_scores[row], rtol=1e-6)
    assert faiss.extract_index_ivf(index.faiss).parallel_mode == (1 if policy else 0)
