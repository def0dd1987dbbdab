"""Every FAISS detail in one place: create, train, add with ids, search, read and write.

A `VectorIndex` wraps one FAISS index whose vectors carry the index's stable int64 ids
(`add_with_ids`; Flat and HNSW sit inside an `IndexIDMap2`, IVF keeps ids itself). Search
parameters (nprobe, efSearch) and filters (an `IDSelector`) travel with each call as
`faiss.SearchParameters*`, so nothing is mutated at query time and one opened index serves
any number of threads. `exact_knn` is the one exact search of the package.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from semsearch.errors import SemsearchError
from semsearch.index.manifest import IndexSpec

log = logging.getLogger(__name__)

METRICS = {"cosine": faiss.METRIC_INNER_PRODUCT, "dot": faiss.METRIC_INNER_PRODUCT,
           "l2": faiss.METRIC_L2, "manhattan": faiss.METRIC_L1}  # fmt: skip
HNSW_EF_CONSTRUCTION = 80
TRAIN_POINTS_PER_CENTROID = 64
MIN_TRAINING_ROWS = 10_000
EF_SEARCH_CANDIDATES = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048)


def prepare_vectors(vectors: np.ndarray, metric: str) -> np.ndarray:
    """Float32, C-contiguous, and unit length for cosine, as FAISS' inner product expects."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if metric == "cosine":
        vectors = vectors.copy()
        faiss.normalize_L2(vectors)
    return vectors


def higher_is_better(metric: str) -> bool:
    return METRICS[metric] == faiss.METRIC_INNER_PRODUCT


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


class VectorIndex:
    """One FAISS index over vectors with ids; see the module docstring."""

    def __init__(self, index: faiss.Index, metric: str) -> None:
        self.faiss = index
        self.metric = metric

    @classmethod
    def create(cls, spec: IndexSpec, dimension: int) -> VectorIndex:
        """An empty index for `spec`; a factory string FAISS cannot build is a clear error."""
        try:
            index = faiss.index_factory(dimension, spec.factory, METRICS[spec.metric])
        except RuntimeError as exc:
            raise SemsearchError(
                f"FAISS cannot build {spec.factory!r} for {dimension}-d vectors with the "
                f"{spec.metric} metric: choose another --index"
            ) from exc
        hnsw = _hnsw_of(index)
        if hnsw is not None:
            hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        if not _keeps_ids(index):
            index = faiss.IndexIDMap2(index)
        return cls(index, spec.metric)

    @classmethod
    def read(cls, path: Path, metric: str, expected_bytes: int | None = None) -> VectorIndex:
        """Load an index file, refusing one that is missing, truncated or replaced."""
        if not path.is_file():
            raise SemsearchError(f"{path} is missing: roll back or rebuild the index with --overwrite")
        size = path.stat().st_size
        if expected_bytes is not None and size != expected_bytes:
            raise SemsearchError(
                f"{path} is {size} bytes, the manifest says {expected_bytes}: it is truncated or was "
                "replaced; roll back or rebuild the index with --overwrite"
            )
        try:
            index = faiss.read_index(str(path))
        except RuntimeError as exc:
            raise SemsearchError(
                f"{path} is corrupt (FAISS cannot read it): rebuild the index with --overwrite"
            ) from exc
        return cls(index, metric)

    def write(self, path: Path) -> int:
        """Write to `path` (through a temporary name) and return its size in bytes."""
        temporary = path.with_name(f".{path.name}.tmp")
        faiss.write_index(self.faiss, str(temporary))
        temporary.replace(path)
        return path.stat().st_size

    @property
    def size(self) -> int:
        return int(self.faiss.ntotal)

    @property
    def dimension(self) -> int:
        return int(self.faiss.d)

    @property
    def is_trained(self) -> bool:
        return bool(self.faiss.is_trained)

    def training_rows(self, rows: int) -> int:
        """How many vectors to train on: 0 for untrained structures, a bounded sample otherwise."""
        if self.is_trained:
            return 0
        ivf = faiss.try_extract_index_ivf(self.faiss)
        centroids = ivf.nlist if ivf is not None else 256
        return min(rows, max(centroids * TRAIN_POINTS_PER_CENTROID, MIN_TRAINING_ROWS))

    def train(self, sample: np.ndarray) -> None:
        log.info("training on %d vectors", len(sample))
        self.faiss.train(prepare_vectors(sample, self.metric))

    def empty_copy(self) -> VectorIndex:
        """The trained structure without its vectors, for segments that are filled later."""
        copy = faiss.clone_index(self.faiss)
        copy.reset()
        return VectorIndex(copy, self.metric)

    def add(self, vectors: np.ndarray, ids: np.ndarray, prepared: bool = False) -> None:
        """Add `vectors` under `ids`; `prepared` says they came from `prepare_vectors` already
        (so they are not copied and normalised a second time)."""
        if len(vectors):
            vectors = vectors if prepared else prepare_vectors(vectors, self.metric)
            self.faiss.add_with_ids(vectors, np.ascontiguousarray(ids, dtype=np.int64))

    def remove(self, ids: np.ndarray) -> int:
        """Drop `ids` from the structure; the number removed."""
        return int(self.faiss.remove_ids(np.ascontiguousarray(ids, dtype=np.int64)))

    def search(
        self,
        queries: np.ndarray,
        k: int,
        params: dict[str, int] | None = None,
        allowed: IdFilter | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Scores and ids of the `k` nearest allowed vectors (-1 where fewer were reached).

        `queries` must come from `prepare_vectors`; L2 scores are squared distances.
        """
        search_params = self._search_parameters(params or {}, allowed)
        return self.faiss.search(queries, k, params=search_params)

    def tunable_parameter(self) -> str | None:
        """`nprobe` for IVF indexes, `efSearch` for HNSW, None for exact ones."""
        if faiss.try_extract_index_ivf(self.faiss) is not None:
            return "nprobe"
        if _hnsw_of(self.faiss) is not None:
            return "efSearch"
        return None

    def parameter_candidates(self, k: int) -> list[int]:
        """The values of the tunable parameter worth measuring, in increasing order."""
        if self.tunable_parameter() == "nprobe":
            nlist = faiss.extract_index_ivf(self.faiss).nlist
            return [*(2**power for power in range(nlist.bit_length()) if 2**power < nlist), nlist]
        return [value for value in EF_SEARCH_CANDIDATES if value >= k] or [k]

    def parameter_ceiling(self) -> int | None:
        """The largest meaningful value of the tunable parameter (nlist for IVF)."""
        ivf = faiss.try_extract_index_ivf(self.faiss)
        return int(ivf.nlist) if ivf is not None else None

    def keeps_exact_vectors(self) -> bool:
        """True for flat storage (Flat, IVF-Flat, HNSW-Flat): its scores are exact."""
        ivf = faiss.try_extract_index_ivf(self.faiss)
        if ivf is not None:
            return isinstance(faiss.downcast_index(ivf), faiss.IndexIVFFlat)
        core = _core(self.faiss)
        storage = faiss.downcast_index(core.storage) if hasattr(core, "hnsw") else core
        return isinstance(storage, faiss.IndexFlat)

    def _search_parameters(
        self, params: dict[str, int], allowed: IdFilter | None
    ) -> faiss.SearchParameters | None:
        selector = allowed.selector() if allowed is not None else None
        parameter = self.tunable_parameter()
        for name, value in params.items():
            if value is None:
                continue
            if name != parameter:
                raise SemsearchError(
                    f"this index has no {name!r} parameter (nprobe is for IVF indexes, "
                    "efSearch for HNSW): drop that option"
                )
            if int(value) < 1:
                raise SemsearchError(f"{name} must be at least 1, not {value}")
        value = params.get(parameter) if parameter else None
        if parameter == "nprobe":
            knobs = faiss.SearchParametersIVF()
            if value is not None:
                knobs.nprobe = int(value)
                knobs.max_codes = 0
        elif parameter == "efSearch":
            knobs = faiss.SearchParametersHNSW()
            if value is not None:
                knobs.efSearch = int(value)
        elif selector is None:
            return None
        else:
            knobs = faiss.SearchParameters()
        if selector is not None:
            knobs.sel = selector
            knobs.referenced_selector = selector
        return knobs


class ExactStandIn(VectorIndex):
    """Exact search standing in for an IVF structure that holds fewer rows than it has lists.

    Why: a segment added to an IVF index carries the whole coarse quantizer (4,096 centroids
    are 6.3 MB at 384-d), and searching it compares every query with all of them before
    scanning any list; an exact scan of its few rows costs less in both memory and time,
    and is exact. The IVF parameter (`nprobe`) the other segments take is accepted and unused.
    """

    def __init__(self, index: faiss.Index, metric: str, stands_for: str | None) -> None:
        super().__init__(index, metric)
        self.stands_for = stands_for

    @classmethod
    def replacing(cls, source: VectorIndex, parts: Iterable[tuple[np.ndarray, np.ndarray]]) -> VectorIndex:
        """`source`, or an exact index over the same (ids, vectors) when that is cheaper."""
        ivf = faiss.try_extract_index_ivf(source.faiss)
        if ivf is None or source.size > ivf.nlist:
            return source
        exact = VectorIndex.create(IndexSpec("flat", "Flat", source.metric), source.dimension)
        for ids, vectors in parts:
            exact.add(np.asarray(vectors, dtype=np.float32), ids)
        return cls(exact.faiss, source.metric, "nprobe")

    def search(
        self, queries: np.ndarray, k: int, params: dict[str, int] | None = None,
        allowed: IdFilter | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        params = {name: value for name, value in (params or {}).items() if name != self.stands_for}
        return super().search(queries, k, params, allowed)


def exact_knn(
    queries: np.ndarray, parts: Iterable[tuple[np.ndarray, np.ndarray]], k: int, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """Scores and ids of the exact top-k of each query over (ids, vectors) parts streamed in turn.

    `queries` must come from `prepare_vectors`; parts are prepared here. Memory stays bounded
    by one part.
    """
    heap = faiss.ResultHeap(len(queries), k, keep_max=higher_is_better(metric))
    for ids, vectors in parts:
        if len(vectors) == 0:
            continue
        flat = faiss.IndexFlat(queries.shape[1], METRICS[metric])
        flat.add(prepare_vectors(vectors, metric))
        scores, positions = flat.search(queries, min(k, len(vectors)))
        ids = np.asarray(ids, dtype=np.int64)
        found = np.where(positions >= 0, ids[np.maximum(positions, 0)], -1)
        heap.add_result(np.ascontiguousarray(scores), np.ascontiguousarray(found))
    heap.finalize()
    return heap.D, heap.I


def _keeps_ids(index: faiss.Index) -> bool:
    """IVF structures store ids themselves; the others need an id map around them."""
    return faiss.try_extract_index_ivf(index) is not None


def _core(index: faiss.Index) -> faiss.Index:
    """The index inside id maps and pre-transforms."""
    index = faiss.downcast_index(index)
    while isinstance(index, faiss.IndexIDMap | faiss.IndexIDMap2 | faiss.IndexPreTransform):
        index = faiss.downcast_index(index.index)
    return index


def _hnsw_of(index: faiss.Index):
    return getattr(_core(index), "hnsw", None)
