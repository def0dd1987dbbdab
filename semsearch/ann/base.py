"""The one small interface every vector structure implements, whatever library and device.

Backends: FAISS (`vector_index.VectorIndex`, on a CPU or placed on a GPU) and torch's exact
search on any device (`torch_exact.TorchExactIndex`); the rest of the package never asks
which it holds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

Parts = Iterable[tuple[np.ndarray, np.ndarray]]  # (ids, vectors) streamed in turn
# Stored vectors read again for each pass over them (sampling, training, adding, tuning).
RereadableParts = Callable[[], Parts]


@dataclass
class IdFilter:
    """The ids a search may return, as a bitmap FAISS reads directly (bit i: id i allowed)."""

    bitmap: np.ndarray
    bound: int
    allowed: int  # how many ids are allowed

    @classmethod
    def of(cls, ids: np.ndarray, bound: int) -> IdFilter:
        mask = np.zeros(bound, dtype=bool)
        mask[ids] = True
        return cls(np.packbits(mask, bitorder="little"), bound, int(len(ids)))

    def selector(self) -> faiss.IDSelector:
        selector = faiss.IDSelectorBitmap(self.bound, faiss.swig_ptr(self.bitmap))
        selector.referenced_bitmap = self.bitmap  # keeps the buffer alive as long as the selector
        return selector

    def allows(self, ids: np.ndarray) -> np.ndarray:
        """Which of `ids` the filter lets through."""
        ids = np.asarray(ids, dtype=np.int64)
        inside = (ids >= 0) & (ids < self.bound)
        bits = np.unpackbits(self.bitmap, count=self.bound, bitorder="little").astype(bool)
        return inside & bits[np.clip(ids, 0, max(self.bound - 1, 0))]


class AnnBackend(ABC):
    """Vectors with int64 ids in one structure; see the module docstring.

    Vectors passed in come from `prepare_vectors` where `prepared` says so; scores are on
    FAISS's scale (inner products, squared L2 or L1 distances); -1 marks a missing result.
    """

    metric: str

    @property
    @abstractmethod
    def size(self) -> int: ...

    @property
    @abstractmethod
    def dimension(self) -> int: ...

    @property
    def exact_device(self) -> str:
        """The torch device this structure's exact k-NN runs on."""
        return "cpu"

    @abstractmethod
    def train(self, sample: np.ndarray) -> None:
        """Learn the structure (IVF centroids, codebooks) from a sample; a no-op for exact ones."""

    @abstractmethod
    def add(self, vectors: np.ndarray, ids: np.ndarray, prepared: bool = False) -> None: ...

    @abstractmethod
    def remove(self, ids: np.ndarray) -> int:
        """Drop `ids`; the number removed."""

    @abstractmethod
    def search(
        self,
        queries: np.ndarray,
        k: int,
        params: dict[str, int] | None = None,
        allowed: IdFilter | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Scores and ids of the `k` nearest allowed vectors; `params` (nprobe, efSearch)
        hold for this call only, so one structure serves any number of threads."""

    def search_parameters(self) -> frozenset[str]:
        """The per-call parameters `search` takes (nprobe, efSearch, oversample); none for
        exact search."""
        return frozenset()

    def knn(self, queries: np.ndarray, parts: Parts, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The exact top-k over (ids, vectors) parts, on this structure's device: the truth
        its own searches are measured against."""
        from semsearch.ann.exact import exact_knn  # torch only where it runs

        return exact_knn(queries, parts, k, self.metric, self.exact_device)

    @abstractmethod
    def write(self, path: Path) -> int:
        """Save to `path` (through a temporary name); the bytes written."""

    @classmethod
    @abstractmethod
    def read(cls, path: Path, metric: str, expected_bytes: int | None = None) -> AnnBackend: ...
