"""Every text's nearest neighbours inside its own collection, through FAISS, in chunks.

Up to AUTO_EXACT_LIMIT vectors the search is exact (Flat). Above it, it uses the trained
structure of the index the vectors came from, or an IVF index trained on the spot, so the
cost grows about linearly with the collection instead of quadratically. On a GPU device
the structure is filled and searched there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from semsearch.ann.base import AnnBackend
from semsearch.ann.devices import CPU, FaissDevice
from semsearch.ann.faiss_gpu import GPU_MAX_K
from semsearch.index.factory import AUTO_EXACT_LIMIT, choose_index
from semsearch.index.manifest import IndexSpec
from semsearch.index.vector_index import VectorIndex

log = logging.getLogger(__name__)
# Trained structures with inverted lists can be emptied and refilled with some of their rows.
REFILLABLE = ("IVF",)


@dataclass(frozen=True)
class Neighbours:
    """One chunk of queries (positions `start`…) and their neighbours' positions and scores."""

    start: int
    positions: np.ndarray
    scores: np.ndarray


def search_structure(
    vectors: np.ndarray,
    metric: str,
    trained: tuple[VectorIndex, dict[str, int], str] | None = None,
    nprobe: int | None = None,
    device: FaissDevice = CPU,
) -> tuple[SearchStructure, str]:
    """A structure over `vectors` (ids are their positions) to search them with, and a few
    words on what it is.

    `trained` is the empty trained structure of the index the vectors came from (with its
    search parameters and factory string); an IVF one is filled with the vectors and used.
    """
    rows, dimension = vectors.shape
    if device.torch_device is not None:  # a GPU without GPU FAISS: exact, matrix products
        from semsearch.ann.torch_exact import TorchExactIndex  # torch only where it runs

        exact = TorchExactIndex(metric, dimension, device.torch_device)
        exact.add(vectors, np.arange(rows), prepared=True)
        return SearchStructure(exact, {}), f"exact, on {device}"
    where = f", on {device}" if device.is_gpu else ""
    if rows <= AUTO_EXACT_LIMIT:
        exact = VectorIndex.create(IndexSpec("flat", "Flat", metric), dimension)
        exact.move_to(device)
        exact.add(vectors, np.arange(rows), prepared=True)
        return SearchStructure(exact, {}), f"Flat (exact{where})"
    if device.is_gpu and nprobe is not None and nprobe > GPU_MAX_K:
        log.warning("GPU FAISS probes at most %d lists: --nprobe %d becomes %d", GPU_MAX_K,
                    nprobe, GPU_MAX_K)  # fmt: skip
        nprobe = GPU_MAX_K
    params = {"nprobe": nprobe} if nprobe is not None else {}
    if trained is not None and trained[2].startswith(REFILLABLE):
        index, own_params, factory = trained
        index.move_to(device)
        index.add(vectors, np.arange(rows), prepared=True)
        about = f"{factory} (the index's own centroids{where})"
        return SearchStructure(index, {**own_params, **params}), about
    return _train_ivf(vectors, metric, params, device)


@dataclass(frozen=True)
class SearchStructure:
    """An index and the search parameters every call uses."""

    index: AnnBackend
    params: dict[str, int]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(queries, k, self.params)


def search_in_chunks(
    index: SearchStructure, vectors: np.ndarray, k: int, chunk: int, show_progress: bool = False,
    queries: range | None = None,
) -> Iterator[Neighbours]:  # fmt: skip
    """The `k` nearest other rows of every row (of the rows in `queries`, default all),
    `chunk` query rows at a time, the chunks starting at multiples of `chunk`."""
    k = min(k, len(vectors) - 1)
    queries = queries if queries is not None else range(len(vectors))
    with tqdm(total=len(queries), desc="searching", unit="text", disable=not show_progress) as bar:
        for start in range(queries.start, queries.stop, chunk):
            query_vectors = vectors[start : min(start + chunk, queries.stop)]
            # One extra neighbour: each row normally finds itself first.
            scores, positions = index.search(query_vectors, k + 1)
            yield Neighbours(start, _without_self(positions, start, k), scores)
            bar.update(len(query_vectors))


def _without_self(positions: np.ndarray, start: int, k: int) -> np.ndarray:
    """`positions` with the query itself, missing results and any (k+1)-th neighbour set to -1."""
    own = np.arange(start, start + len(positions))[:, None]
    valid = (positions >= 0) & (positions != own)
    valid &= np.cumsum(valid, axis=1) <= k
    return np.where(valid, positions, -1)


def _train_ivf(
    vectors: np.ndarray, metric: str, params: dict[str, int], device: FaissDevice
) -> tuple[SearchStructure, str]:
    spec = choose_index("ivf", len(vectors), vectors.shape[1], metric)
    index = VectorIndex.create(spec, vectors.shape[1])
    index.move_to(device)
    sample = np.random.default_rng(0).choice(
        len(vectors), size=index.training_rows(len(vectors)), replace=False
    )
    index.train(vectors[np.sort(sample)])
    index.add(vectors, np.arange(len(vectors)), prepared=True)
    where = f", on {device}" if index.device.is_gpu else ""
    return SearchStructure(
        index, {**spec.search_params, **params}
    ), f"{spec.factory} (trained for mining{where})"
