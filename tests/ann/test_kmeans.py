"""IVF's k-means and list assignment through torch (on CPU tensors here): spherical for
inner products as FAISS trains IVF, so the lists are as balanced as FAISS's."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from semsearch.ann.devices import CPU, FaissDevice
from semsearch.ann.exact import exact_knn
from semsearch.ann.factory import IndexSpec
from semsearch.ann.kmeans import assign, kmeans
from semsearch.ann.vector_index import VectorIndex, prepare_vectors

TORCH_ON_CPU = FaissDevice(torch_device="cpu")


def _uneven_clusters(rows: int, seed: int = 3) -> np.ndarray:
    """Unit vectors around 16 centres, from tight clusters to loose ones: a plain mean of a
    loose cluster is short, and by inner product draws fewer rows than a tight one's."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(16, 32))
    which = rng.integers(0, 16, rows)
    spread = np.linspace(0.1, 1.5, 16)[which, None]
    return prepare_vectors(
        (centres[which] + spread * rng.normal(size=(rows, 32))).astype(np.float32), "cosine"
    )


def _imbalance(vectors: np.ndarray, centroids: np.ndarray) -> float:
    """FAISS's imbalance factor of the lists: 1.0 when every list holds as many rows."""
    sizes = np.bincount(assign(vectors, centroids, "cosine", "cpu"), minlength=len(centroids))
    return float((sizes.astype(np.float64) ** 2).sum() * len(sizes) / sizes.sum() ** 2)


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_inner_product_kmeans_is_spherical(metric) -> None:
    centroids = kmeans(_uneven_clusters(3_000), 32, metric, "cpu")
    np.testing.assert_allclose(np.linalg.norm(centroids, axis=1), 1.0, atol=1e-5)


def test_l2_kmeans_keeps_plain_means() -> None:
    centroids = kmeans(_uneven_clusters(3_000), 32, "l2", "cpu")
    assert np.linalg.norm(centroids, axis=1).min() < 0.9


def test_torch_lists_are_as_balanced_and_as_good_as_faiss_ones() -> None:
    vectors, ids = _uneven_clusters(8_000), np.arange(8_000)
    _, exact = exact_knn(vectors[:300], [(ids, vectors)], 10, "cosine")
    recall, imbalance = {}, {}
    for device in (CPU, TORCH_ON_CPU):
        index = VectorIndex.create(IndexSpec("ivf", "IVF64,Flat", "cosine"), 32)
        with index.placed(device):
            index.train(vectors)
            index.add(vectors, ids, prepared=True)
        ivf = faiss.extract_index_ivf(index.faiss)
        imbalance[str(device)] = _imbalance(vectors, ivf.quantizer.reconstruct_n(0, ivf.nlist))
        _, found = index.search(vectors[:300], 10, {"nprobe": 2})
        recall[str(device)] = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact)])
    assert imbalance["cpu (through torch)"] <= 1.1 * imbalance["cpu"]
    assert recall["cpu (through torch)"] >= recall["cpu"] - 0.01


def _lists(index: VectorIndex) -> list[int]:
    ivf = faiss.extract_index_ivf(index.faiss)
    return [ivf.invlists.list_size(number) for number in range(ivf.nlist)]


@pytest.mark.parametrize("factory", ["IVF32,Flat", "IVF32,SQfp16"])
def test_the_torch_path_puts_every_row_in_the_list_faiss_would(factory) -> None:
    vectors, ids = _uneven_clusters(4_000), np.arange(4_000)
    trained = VectorIndex.create(IndexSpec("ivf", factory, "cosine"), vectors.shape[1])
    with trained.placed(TORCH_ON_CPU):
        trained.train(vectors[:2_000])  # k-means through torch
    assert trained.is_trained and trained.device == CPU
    by_faiss = VectorIndex(faiss.clone_index(trained.faiss), "cosine")  # trained, empty
    by_torch = VectorIndex(faiss.clone_index(trained.faiss), "cosine")
    by_faiss.add(vectors, ids, prepared=True)
    with by_torch.placed(TORCH_ON_CPU):
        by_torch.add(vectors, ids, prepared=True)
    assert by_torch.size == len(vectors) and _lists(by_torch) == _lists(by_faiss)
    scores, found = by_torch.search(vectors[:50], 5, {"nprobe": 32})
    expected = by_faiss.search(vectors[:50], 5, {"nprobe": 32})
    np.testing.assert_array_equal(found, expected[1])
