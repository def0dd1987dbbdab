"""Exact search through torch on any device, behind the backend interface.

Why: where FAISS has no GPU support (the usual CUDA 13 torch with faiss-cpu), an exact
search as tiled matrix products on the GPU beats scanning IVF lists on the CPU, and it
is exact; the same code runs on CPU tensors in tests. Vectors are placed on the device
once (`semsearch.ann.exact.ExactSearch`) and placed again only after they change.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from semsearch.ann.base import AnnBackend, IdFilter
from semsearch.ann.exact import ExactSearch
from semsearch.ann.metrics import prepare_vectors
from semsearch.disk import temporary_for
from semsearch.errors import SemsearchError


class TorchExactIndex(AnnBackend):
    """Vectors with ids searched exactly on a torch device; see the module docstring."""

    def __init__(self, metric: str, dimension: int, device: str = "cpu") -> None:
        self.metric, self.device = metric, device
        self._dimension = dimension
        self.vectors = np.empty((0, dimension), np.float32)
        self.ids = np.empty(0, np.int64)
        self._search: ExactSearch | None = None

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def exact_device(self) -> str:
        return self.device

    def train(self, sample: np.ndarray) -> None:
        """Nothing to learn: the search is exact."""

    def add(self, vectors: np.ndarray, ids: np.ndarray, prepared: bool = False) -> None:
        vectors = np.asarray(
            vectors if prepared else prepare_vectors(vectors, self.metric), np.float32
        )
        ids = np.asarray(ids, np.int64)
        if self.size:  # a first add keeps the caller's array: a collection is not copied
            vectors, ids = np.concatenate([self.vectors, vectors]), np.concatenate([self.ids, ids])
        self.vectors, self.ids, self._search = vectors, ids, None

    def remove(self, ids: np.ndarray) -> int:
        keep = ~np.isin(self.ids, np.asarray(ids, np.int64))
        removed = int(len(keep) - keep.sum())
        if removed:
            self.vectors, self.ids, self._search = self.vectors[keep], self.ids[keep], None
        return removed

    def search(
        self,
        queries: np.ndarray,
        k: int,
        params: dict[str, int] | None = None,
        allowed: IdFilter | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        for name, value in (params or {}).items():
            if value is not None:
                raise SemsearchError(f"exact search has no {name!r} parameter: drop that option")
        if allowed is not None:  # a filtered search: the allowed rows alone, exactly
            rows = np.flatnonzero(allowed.allows(self.ids))
            scores, positions = ExactSearch(self.vectors[rows], self.metric, self.device).search(
                queries, k
            )
            return _padded(scores, self.ids[rows][positions], k, self.metric)
        if self._search is None:
            self._search = ExactSearch(self.vectors, self.metric, self.device)
        scores, positions = self._search.search(queries, k)
        return _padded(scores, self.ids[positions], k, self.metric)

    def write(self, path: Path) -> int:
        with temporary_for(path) as temporary, open(temporary, "wb") as out:
            np.savez(out, vectors=self.vectors, ids=self.ids, metric=np.array(self.metric))
            out.flush()
            os.fsync(out.fileno())
        return path.stat().st_size

    @classmethod
    def read(cls, path: Path, metric: str, expected_bytes: int | None = None) -> TorchExactIndex:
        if not path.is_file():
            raise SemsearchError(f"{path} is missing: rebuild the index with --overwrite")
        if expected_bytes is not None and path.stat().st_size != expected_bytes:
            raise SemsearchError(f"{path} is truncated or was replaced: rebuild the index")
        with np.load(path) as stored:
            index = cls(metric, stored["vectors"].shape[1])
            index.add(stored["vectors"], stored["ids"], prepared=True)
        return index


def _padded(
    scores: np.ndarray, ids: np.ndarray, k: int, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """Results widened to `k` columns (-1 ids) where fewer rows exist, as FAISS answers."""
    missing = k - scores.shape[1]
    if missing <= 0:
        return scores, ids
    fill = -np.inf if metric in ("cosine", "dot") else np.inf
    rows = len(scores)
    return (
        np.hstack([scores, np.full((rows, missing), fill, np.float32)]),
        np.hstack([ids, np.full((rows, missing), -1, np.int64)]),
    )
