"""Every FAISS detail in one place: create, train, add with ids, search, read and write.

Vectors carry the index's stable int64 ids (Flat and HNSW inside an `IndexIDMap2`, IVF
keeps ids itself). Search parameters and filters travel with each call
(`faiss.SearchParameters*`), so one opened index serves any number of threads. The heavy
work can run on a GPU (`placed(device)`); what is written is always a CPU index, and a GPU
out of memory hands the work back to the CPU instead of failing the job.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import faiss
import numpy as np

from semsearch.ann import faiss_gpu as gpu
from semsearch.ann.base import AnnBackend, IdFilter
from semsearch.ann.devices import CPU, FaissDevice, faiss_reason, is_out_of_memory
from semsearch.ann.factory import IndexSpec
from semsearch.ann.metrics import METRICS, prepare_vectors
from semsearch.disk import temporary_for
from semsearch.errors import SemsearchError

log = logging.getLogger(__name__)

HNSW_EF_CONSTRUCTION = 80
TRAIN_POINTS_PER_CENTROID = 64
MIN_TRAINING_ROWS = 10_000
EF_SEARCH_CANDIDATES = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048)
Result = TypeVar("Result")


class VectorIndex(AnnBackend):
    """One FAISS index over vectors with ids, the FAISS backend of `semsearch.ann.base`;
    see the module docstring."""

    def __init__(self, index: faiss.Index, metric: str) -> None:
        self.faiss = index
        self.metric = metric
        self.device = CPU
        # The CPU structure, for questions a GPU copy cannot answer (its kind, nlist, HNSW).
        self._layout = index

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
        if faiss.try_extract_index_ivf(index) is None:  # IVF keeps ids, the others need a map
            index = faiss.IndexIDMap2(index)
        return cls(index, spec.metric)

    @classmethod
    def read(
        cls, path: Path, metric: str, expected_bytes: int | None = None, mapped: bool = False
    ) -> VectorIndex:
        """Load an index file, refusing one that is missing, truncated or replaced; `mapped`
        leaves IVF lists in the file, memory-mapped (`faiss.IO_FLAG_MMAP`), read-only."""
        if not path.is_file():
            raise SemsearchError(
                f"{path} is missing: roll back or rebuild the index with --overwrite"
            )
        size = path.stat().st_size
        if expected_bytes is not None and size != expected_bytes:
            raise SemsearchError(
                f"{path} is {size} bytes, the manifest says {expected_bytes}: it is truncated or was "
                "replaced; roll back or rebuild the index with --overwrite"
            )
        try:
            index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP if mapped else 0)
        except RuntimeError as exc:
            raise SemsearchError(
                f"{path} is corrupt (FAISS cannot read it): rebuild the index with --overwrite"
            ) from exc
        return cls(index, metric)

    def write(self, path: Path) -> int:
        """Write to `path` (through a temporary name) and return its size in bytes; a GPU
        index is written as its CPU copy, which opens anywhere."""
        on_disk = gpu.to_cpu(self.faiss) if self.device.is_gpu else self.faiss
        with temporary_for(path) as temporary:
            faiss.write_index(on_disk, str(temporary))
        return path.stat().st_size

    def move_to(self, device: FaissDevice) -> bool:
        """Move the index to `device`; False where it stays (the CPU, or a structure FAISS
        has no GPU version of)."""
        if device == self.device:
            return device.is_gpu or device.torch_device is not None
        if device.torch_device is not None:  # FAISS stays on the CPU, its heavy steps do not
            self.move_to_cpu()
            self.device = device
            return True
        if not device.is_gpu:
            self.move_to_cpu()
            return False
        placed = gpu.to_gpu(self.faiss, device.gpu)
        if placed is None:
            return False
        self.faiss, self.device = placed, device
        return True

    def move_to_cpu(self) -> None:
        if self.device.is_gpu:
            self.faiss = self._layout = gpu.to_cpu(self.faiss)
        self.device = CPU

    @contextmanager
    def placed(self, device: FaissDevice) -> Iterator[VectorIndex]:
        """The index on `device` inside the block, back on the CPU after it."""
        if device == self.device or not self.move_to(device):
            yield self
            return
        try:
            yield self
        finally:
            self.move_to_cpu()

    def _falling_back(
        self, work: Callable[[], Result], undo: Callable[[], object] | None = None
    ) -> Result:
        """`work()`, done again on the CPU (after `undo()`) if the GPU runs out of memory."""
        try:
            return work()
        except (RuntimeError, MemoryError) as exc:  # torch's OutOfMemoryError is a RuntimeError
            if self.device == CPU or not is_out_of_memory(exc):
                raise
            log.warning(
                "the GPU ran out of memory (%s): going on with FAISS on the CPU", faiss_reason(exc)
            )
            self.move_to_cpu()
            if undo is not None:
                undo()
            return work()

    @property
    def size(self) -> int:
        return int(self.faiss.ntotal)

    @property
    def dimension(self) -> int:
        return int(self.faiss.d)

    @property
    def exact_device(self) -> str:
        return self.device.exact_device

    @property
    def is_trained(self) -> bool:
        return bool(self.faiss.is_trained)

    def training_rows(self, rows: int) -> int:
        """How many vectors to train on: 0 for untrained structures, a bounded sample otherwise."""
        if self.is_trained:
            return 0
        ivf = self._ivf()
        centroids = ivf.nlist if ivf is not None else 256
        return min(rows, max(centroids * TRAIN_POINTS_PER_CENTROID, MIN_TRAINING_ROWS))

    def train(self, sample: np.ndarray) -> None:
        log.info("training on %d vectors (%s)", len(sample), self.device)
        sample = prepare_vectors(sample, self.metric)

        def work() -> None:
            ivf = self._plain_ivf()
            if self.device.torch_device and ivf is not None and ivf.quantizer.ntotal == 0:
                from semsearch.ann import kmeans  # torch only where it runs

                kmeans.train_quantizer(ivf, sample, self.metric, self.device.torch_device)
            self.faiss.train(sample)

        self._falling_back(work)

    def add(self, vectors: np.ndarray, ids: np.ndarray, prepared: bool = False) -> None:
        """Add `vectors` under `ids`; `prepared` says they came from `prepare_vectors` already
        (so they are not copied and normalised a second time)."""
        if len(vectors):
            vectors = vectors if prepared else prepare_vectors(vectors, self.metric)
            ids = np.ascontiguousarray(ids, dtype=np.int64)
            # A GPU that failed half-way may hold some of the rows: they are removed first.
            self._falling_back(lambda: self._add(vectors, ids), undo=lambda: self.remove(ids))

    def _add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        ivf = self._plain_ivf()
        if self.device.torch_device is None or ivf is None:
            self.faiss.add_with_ids(vectors, ids)
            return
        from semsearch.ann import kmeans  # torch only where it runs

        kmeans.add_to_lists(ivf, vectors, ids, self.metric, self.device.torch_device)

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

        def work() -> tuple[np.ndarray, np.ndarray]:
            search_params = self._search_parameters(params or {}, allowed)
            self._share_threads(len(queries))
            return self.faiss.search(queries, k, params=search_params)

        return self._falling_back(work)

    def _share_threads(self, queries: int) -> None:
        """With fewer queries than FAISS threads, share each query's IVF lists among them
        (`parallel_mode` 1; one PyPI query 1.49 -> 0.81 ms on two threads), where OpenMP's
        threads sleep when idle (OMP_WAIT_POLICY=PASSIVE, as `query` and `serve` set it):
        spinning, they took a core from the encoder. Either mode finds the same neighbours."""
        ivf = None if self.device.is_gpu else self._ivf()
        if ivf is not None:
            passive = os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE"
            ivf.parallel_mode = 1 if passive and queries < faiss.omp_get_max_threads() else 0

    def tunable_parameter(self) -> str | None:
        """`nprobe` for IVF indexes, `efSearch` for HNSW, None for exact ones."""
        if self._ivf() is not None:
            return "nprobe"
        if _hnsw_of(self._layout) is not None:
            return "efSearch"
        return None

    def search_parameters(self) -> frozenset[str]:
        parameter = self.tunable_parameter()
        return frozenset({parameter} if parameter else ())

    def parameter_candidates(self, k: int) -> list[int]:
        """The values of the tunable parameter worth measuring, in increasing order (on a GPU,
        up to the most lists GPU FAISS probes)."""
        if self.tunable_parameter() == "nprobe":
            nlist = self._ivf().nlist
            if self.device.is_gpu:
                nlist = min(nlist, gpu.GPU_MAX_K)
            return [*(2**power for power in range(nlist.bit_length()) if 2**power < nlist), nlist]
        return [value for value in EF_SEARCH_CANDIDATES if value >= k] or [k]

    def parameter_ceiling(self) -> int | None:
        """The largest meaningful value of the tunable parameter (nlist for IVF)."""
        ivf = self._ivf()
        return int(ivf.nlist) if ivf is not None else None

    def keeps_exact_vectors(self) -> bool:
        """True for flat storage (Flat, IVF-Flat, HNSW-Flat): its scores are exact."""
        ivf = self._ivf()
        if ivf is not None:
            return isinstance(faiss.downcast_index(ivf), faiss.IndexIVFFlat)
        core = _core(self._layout)
        storage = faiss.downcast_index(core.storage) if hasattr(core, "hnsw") else core
        return isinstance(storage, faiss.IndexFlat)

    def _ivf(self) -> faiss.IndexIVF | None:
        return faiss.try_extract_index_ivf(self._layout)

    def _plain_ivf(self) -> faiss.IndexIVF | None:
        """The index itself if it is an IVF structure with no transform before it."""
        index = faiss.downcast_index(self.faiss)
        return index if isinstance(index, faiss.IndexIVF) else None

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
                    "efSearch for HNSW, oversample for disk): drop that option"
                )
            if int(value) < 1:
                raise SemsearchError(f"{name} must be at least 1, not {value}")
        value = params.get(parameter) if parameter else None
        if parameter == "nprobe":  # without a value, as many lists as the index probes itself
            knobs = ivf_parameters(int(value) if value is not None else self._ivf().nprobe)
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
    def replacing(
        cls, source: VectorIndex, parts: Iterable[tuple[np.ndarray, np.ndarray]]
    ) -> VectorIndex:
        """`source`, or an exact index over the same (ids, vectors) when that is cheaper."""
        if source._ivf() is None or source.size > source.parameter_ceiling():
            return source
        exact = VectorIndex.create(IndexSpec("flat", "Flat", source.metric), source.dimension)
        for ids, vectors in parts:
            exact.add(np.asarray(vectors, dtype=np.float32), ids)
        return cls(exact.faiss, source.metric, "nprobe")

    def search_parameters(self) -> frozenset[str]:
        return frozenset({self.stands_for} if self.stands_for else ())

    def search(
        self,
        queries: np.ndarray,
        k: int,
        params: dict[str, int] | None = None,
        allowed: IdFilter | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        params = {name: value for name, value in (params or {}).items() if name != self.stands_for}
        return super().search(queries, k, params, allowed)


def ivf_parameters(nprobe: int) -> faiss.SearchParametersIVF:
    """Per-call IVF parameters, the only way they are built: a bare `SearchParametersIVF()`
    probes one list whatever the index's own nprobe, so nprobe is required here."""
    knobs = faiss.SearchParametersIVF()
    knobs.nprobe = nprobe
    knobs.max_codes = 0
    return knobs


def _core(index: faiss.Index) -> faiss.Index:
    """The index inside id maps and pre-transforms."""
    index = faiss.downcast_index(index)
    while isinstance(index, faiss.IndexIDMap | faiss.IndexIDMap2 | faiss.IndexPreTransform):
        index = faiss.downcast_index(index.index)
    return index


def _hnsw_of(index: faiss.Index):
    return getattr(_core(index), "hnsw", None)
