"""The backend interface's contract, held by FAISS (`VectorIndex`) and by torch
(`TorchExactIndex`, on CPU tensors here): add with ids, search with filters, remove,
exact k-NN, save and load, a memory estimate."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.ann.base import AnnBackend, IdFilter
from semsearch.ann.factory import IndexSpec
from semsearch.ann.metrics import prepare_vectors
from semsearch.ann.torch_exact import TorchExactIndex
from semsearch.ann.vector_index import VectorIndex
from semsearch.errors import SemsearchError

ROWS, DIMENSION = 600, 16


def _backend(kind: str, metric: str) -> AnnBackend:
    if kind == "torch":
        return TorchExactIndex(metric, DIMENSION, "cpu")
    return VectorIndex.create(IndexSpec("flat", "Flat", metric), DIMENSION)


@pytest.fixture(params=["faiss", "torch"])
def kind(request) -> str:
    return request.param


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_both_backends_answer_alike_with_ids_filters_and_removals(kind, metric, tmp_path) -> None:
    rng = np.random.default_rng(0)
    vectors = prepare_vectors(rng.normal(size=(ROWS, DIMENSION)), metric)
    ids = np.arange(ROWS) * 3 + 7  # ids are not positions
    backend = _backend(kind, metric)
    backend.train(vectors)
    backend.add(vectors, ids, prepared=True)
    assert backend.size == ROWS
    scores, found = backend.search(vectors[:20], 5)
    assert found[:, 0].tolist() == ids[:20].tolist()  # each row is its own nearest
    truth_scores, truth = backend.knn(vectors[:20], [(ids, vectors)], 5)
    assert found.tolist() == truth.tolist()
    np.testing.assert_allclose(scores, truth_scores, atol=1e-4)
    odd = IdFilter.of(ids[1::2], int(ids.max()) + 1)
    _, filtered = backend.search(vectors[:20], 5, None, odd)
    assert np.isin(filtered, ids[1::2]).all()
    assert backend.remove(ids[:10]) == 10 and backend.size == ROWS - 10
    _, after = backend.search(vectors[:10], 1)
    assert not np.isin(after, ids[:10]).any()
    size = backend.write(tmp_path / "index")
    assert size == (tmp_path / "index").stat().st_size
    again = type(backend).read(tmp_path / "index", metric)
    assert again.search(vectors[:20], 5)[1].tolist() == backend.search(vectors[:20], 5)[1].tolist()


def test_fewer_rows_than_k_are_padded_with_minus_one(kind) -> None:
    backend = _backend(kind, "cosine")
    backend.add(np.eye(3, DIMENSION, dtype=np.float32), np.array([4, 5, 6]))
    _, found = backend.search(np.eye(1, DIMENSION, dtype=np.float32), 5)
    assert found[0, 0] == 4 and (found[0, 3:] == -1).all()


def test_torch_exact_search_has_no_approximate_parameters() -> None:
    backend = TorchExactIndex("cosine", DIMENSION)
    with pytest.raises(SemsearchError, match="nprobe"):
        backend.search(np.ones((1, DIMENSION), np.float32), 1, {"nprobe": 4})
