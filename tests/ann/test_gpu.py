"""`VectorIndex` and mining on each device: out-of-memory hand-over to the CPU, GPU FAISS
placement (faked here), FAISS's heavy steps through torch (on CPU tensors here), and FAISS
on the GPU (tests marked `gpu`, run where torch sees CUDA and FAISS has GPU support)."""

from __future__ import annotations

import logging

import faiss
import numpy as np
import pytest
import torch

from semsearch.ann import faiss_gpu as gpu
from semsearch.ann.devices import CPU, FaissDevice, gpu_count
from semsearch.ann.exact import exact_knn
from semsearch.ann.factory import IndexSpec
from semsearch.ann.tune import tune_against_exact
from semsearch.ann.vector_index import VectorIndex, prepare_vectors
from semsearch.mining.neighbours import search_in_chunks, search_structure

needs_gpu_faiss = pytest.mark.skipif(gpu_count() == 0, reason="needs GPU FAISS (the gpu extra)")


def _vectors(rows: int, dimension: int = 32, seed: int = 0) -> np.ndarray:
    """Clustered unit vectors, so that IVF lists and nearest neighbours mean something."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(16, dimension))
    points = centres[rng.integers(0, 16, rows)] + 0.3 * rng.normal(size=(rows, dimension))
    return prepare_vectors(points.astype(np.float32), "cosine")


def _ivf(rows: np.ndarray, nlist: int = 32) -> VectorIndex:
    return VectorIndex.create(IndexSpec("ivf", f"IVF{nlist},Flat", "cosine"), rows.shape[1])


class _FailsHalfWay:
    """A FAISS index that adds half of a batch and then reports a failed GPU allocation, the
    way a GPU index that runs out of memory mid-add can leave itself."""

    def __init__(self, inner: faiss.Index) -> None:
        self.inner = inner

    def add_with_ids(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        half = len(ids) // 2
        self.inner.add_with_ids(vectors[:half], ids[:half])
        raise RuntimeError(
            "Error in virtual void* faiss::gpu::StandardGpuResourcesImpl::"
            "allocMemory: Error: 'err == cudaSuccess' failed: StandardGpuResources: "
            "alloc fail type TemporaryMemoryBuffer dev 0 space Device stream 0 "
            "size 1073741824 bytes (cudaMalloc error out of memory [2])"
        )

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def test_a_gpu_out_of_memory_mid_add_goes_on_on_the_cpu_without_duplicates(
    monkeypatch, caplog
) -> None:
    vectors = _vectors(400)
    ids = np.arange(1000, 1400)
    index = VectorIndex.create(IndexSpec("flat", "Flat", "cosine"), vectors.shape[1])
    inner = index.faiss
    index.faiss, index.device = _FailsHalfWay(inner), FaissDevice(0)  # as if placed on GPU 0
    monkeypatch.setattr(gpu, "to_cpu", lambda failing: failing.inner)  # its CPU copy
    with caplog.at_level(logging.WARNING, logger="semsearch.ann.vector_index"):
        index.add(vectors, ids, prepared=True)
    assert index.device == CPU and index.faiss is inner
    assert index.size == 400  # the half added before the failure was removed, then all added
    _, found = index.search(vectors[:5], 1)
    assert found[:, 0].tolist() == ids[:5].tolist()
    assert ["going on with FAISS on the CPU" in r.getMessage() for r in caplog.records] == [True]


def test_a_cpu_index_stays_where_it_is_when_placed_on_the_cpu() -> None:
    index = _ivf(_vectors(10))
    with index.placed(CPU) as placed:
        assert placed is index and index.device == CPU
    assert not _on_gpu(index.faiss)


def test_torch_s_cached_memory_is_released_before_faiss_allocates_on_the_gpu(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("torch cache released"))
    monkeypatch.setattr(gpu, "resources", lambda number: calls.append("FAISS resources"))
    monkeypatch.setattr(faiss, "GpuClonerOptions", lambda: type("Options", (), {})(), raising=False)
    monkeypatch.setattr(faiss, "INDICES_64_BIT", 3, raising=False)

    def to_gpu(resources, number, index, options):
        calls.append("FAISS index copied")
        return index

    monkeypatch.setattr(faiss, "index_cpu_to_gpu", to_gpu, raising=False)
    index = _ivf(_vectors(10))
    assert index.move_to(FaissDevice(0))
    assert calls == ["torch cache released", "FAISS resources", "FAISS index copied"]


TORCH_ON_CPU = FaissDevice(torch_device="cpu")  # the torch path, on this machine's CPU


def _lists(index: VectorIndex) -> list[int]:
    ivf = faiss.extract_index_ivf(index.faiss)
    return [ivf.invlists.list_size(number) for number in range(ivf.nlist)]


def test_mining_through_torch_finds_the_exact_neighbours() -> None:
    vectors = _vectors(2_000, seed=5)
    found = {}
    for device in (CPU, TORCH_ON_CPU):
        structure, about = search_structure(vectors, "cosine", device=device)
        found[str(device)] = np.concatenate(
            [chunk.positions for chunk in search_in_chunks(structure, vectors, 5, 700)]
        )
    assert "through torch" in about
    assert np.mean(found["cpu"] == found["cpu (through torch)"]) >= 0.99


def test_mining_through_torch_places_the_collection_once_and_shrinks_tiles_when_full(
    monkeypatch, caplog
) -> None:
    from semsearch.ann import exact

    vectors = _vectors(1_500, seed=6)
    structure, _ = search_structure(vectors, "cosine", device=CPU)
    expected = np.concatenate([c.positions for c in search_in_chunks(structure, vectors, 5, 500)])
    placements, real_place, real_nearness = [], exact.ExactSearch._placed, exact.nearness

    def place(self, base):
        placements.append(len(base))
        return real_place(self, base)

    def nearness(queries, base, metric):  # a device with room for 100,000 scores at a time
        if len(queries) * len(base) > 100_000:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_nearness(queries, base, metric)

    monkeypatch.setattr(exact.ExactSearch, "_placed", place)
    monkeypatch.setattr(exact, "nearness", nearness)
    structure, _ = search_structure(vectors, "cosine", device=TORCH_ON_CPU)
    with caplog.at_level(logging.WARNING):
        found = np.concatenate([c.positions for c in search_in_chunks(structure, vectors, 5, 500)])
    assert placements == [len(vectors)]  # once, not once per chunk of queries
    assert np.mean(found == expected) >= 0.99
    assert sum("ran out of memory" in record.getMessage() for record in caplog.records) == 1


def test_torch_out_of_memory_goes_on_with_faiss_on_the_cpu(monkeypatch, caplog) -> None:
    import torch

    from semsearch.ann import kmeans

    def full(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")

    monkeypatch.setattr(kmeans, "assign", full)
    vectors, ids = _vectors(2_000), np.arange(2_000)
    index = _ivf(vectors)
    index.train(vectors)
    with caplog.at_level(logging.WARNING), index.placed(TORCH_ON_CPU):
        index.add(vectors, ids, prepared=True)
        assert index.device == CPU
    assert index.size == len(vectors)
    assert any("ran out of memory" in record.getMessage() for record in caplog.records)


# ---- on a GPU ---------------------------------------------------------------------------


@pytest.mark.gpu
@needs_gpu_faiss
def test_train_add_tune_on_the_gpu_matches_the_cpu_and_writes_a_cpu_index(tmp_path) -> None:
    vectors = _vectors(20_000)
    ids = np.arange(len(vectors))
    indexes = {}
    for device in (CPU, FaissDevice(0)):
        index = _ivf(vectors, nlist=64)
        with index.placed(device):
            assert index.device == device
            index.train(vectors[:5_000])
            index.add(vectors, ids, prepared=True)
            result = tune_against_exact(
                index, vectors[:200], lambda: [(ids, vectors)], 0.95, 10, ids[:200]
            )
        assert index.device == CPU and not _on_gpu(index.faiss)
        size = index.write(tmp_path / f"{device}.faiss")
        assert size > 0
        indexes[str(device)] = (VectorIndex.read(tmp_path / f"{device}.faiss", "cosine"), result)
    cpu_tuning, (gpu_index, gpu_tuning) = indexes["cpu"][1], indexes["cuda:0"]
    assert not _on_gpu(gpu_index.faiss) and gpu_index.size == len(vectors)
    assert gpu_tuning.met and abs(gpu_tuning.value - cpu_tuning.value) <= cpu_tuning.value
    _, exact = exact_knn(vectors[:300], [(ids, vectors)], 10, "cosine")
    _, found = gpu_index.search(vectors[:300], 10, {"nprobe": 64})  # every list: exact
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact)]) >= 0.99


@pytest.mark.gpu
@needs_gpu_faiss
@pytest.mark.parametrize("metric", ["cosine", "l2", "manhattan"])
def test_exact_search_on_the_gpu_equals_the_cpu(metric) -> None:
    vectors = _vectors(5_000, seed=1)
    parts = [(np.arange(0, 2_500), vectors[:2_500]), (np.arange(2_500, 5_000), vectors[2_500:])]
    queries = prepare_vectors(vectors[:100], metric)
    cpu_scores, cpu_ids = exact_knn(queries, parts, 10, metric)
    gpu_scores, gpu_ids = exact_knn(queries, parts, 10, metric, FaissDevice(0).exact_device)
    assert np.mean(cpu_ids == gpu_ids) >= 0.99  # ties may swap
    np.testing.assert_allclose(gpu_scores, cpu_scores, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@needs_gpu_faiss
def test_mining_searches_on_the_gpu_find_the_same_neighbours() -> None:
    vectors = _vectors(3_000, seed=2)
    found = {}
    for device in (CPU, FaissDevice(0)):
        structure, about = search_structure(vectors, "cosine", device=device)
        assert ("cuda:0" in about) == device.is_gpu
        found[str(device)] = np.concatenate(
            [chunk.positions for chunk in search_in_chunks(structure, vectors, 5, 1_000)]
        )
    assert np.mean(found["cpu"] == found["cuda:0"]) >= 0.99


@pytest.mark.gpu
@needs_gpu_faiss
def test_a_gpu_that_runs_out_of_memory_hands_the_add_to_the_cpu(caplog) -> None:
    import torch

    vectors = _vectors(400_000, dimension=256)
    index = VectorIndex.create(IndexSpec("flat", "Flat", "cosine"), 256)
    index.move_to(FaissDevice(0))
    free, _ = torch.cuda.mem_get_info()
    ballast = torch.empty(max(free - (64 << 20), 0), dtype=torch.uint8, device="cuda")
    try:
        with caplog.at_level(logging.WARNING):
            index.add(vectors, np.arange(len(vectors)), prepared=True)  # 400 MB: does not fit
    finally:
        del ballast
    assert index.device == CPU and index.size == len(vectors)
    assert any("ran out of memory" in record.getMessage() for record in caplog.records)


@pytest.mark.gpu
def test_the_torch_path_on_a_gpu_puts_rows_where_faiss_would() -> None:
    vectors, ids = _vectors(20_000), np.arange(20_000)
    trained = _ivf(vectors, nlist=64)
    with trained.placed(FaissDevice(torch_device="cuda:0")):
        trained.train(vectors[:5_000])
    by_faiss = VectorIndex(faiss.clone_index(trained.faiss), "cosine")  # trained, empty
    by_torch = VectorIndex(faiss.clone_index(trained.faiss), "cosine")
    by_faiss.add(vectors, ids, prepared=True)
    with by_torch.placed(FaissDevice(torch_device="cuda:0")):
        by_torch.add(vectors, ids, prepared=True)
        _, exact_gpu = exact_knn(
            vectors[:100], [(ids, vectors)], 10, "cosine", by_torch.device.exact_device
        )
    assert np.mean(np.array(_lists(by_torch)) == np.array(_lists(by_faiss))) >= 0.99  # fp ties
    _, exact_cpu = exact_knn(vectors[:100], [(ids, vectors)], 10, "cosine")
    assert np.mean(exact_gpu == exact_cpu) >= 0.99


def _on_gpu(index) -> bool:
    """Whether `index` (or the index inside its id map) lives on a GPU."""
    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexIDMap | faiss.IndexIDMap2):
        index = faiss.downcast_index(index.index)
    return type(index).__name__.startswith("Gpu")
