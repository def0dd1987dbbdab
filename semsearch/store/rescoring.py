"""The `disk` index type: compact codes find candidates, the stored vectors rank them exactly.

Why: an in-RAM index costs ~800 bytes a 384-d row, so 20 million rows do not fit a 24 GiB
machine. As DiskANN and Qdrant do, a `disk` segment keeps only IVF-PQ codes (48 bytes a
row) in a FAISS file opened with `IO_FLAG_MMAP` (file pages, not process memory). A search
asks the codes for max(k, 10) x `oversample` candidates (as deep as tuning measured,
whatever k), reads only their stored vectors and ranks
them by exact score: recall depends only on whether the true top-k are among the
candidates. `oversample` in a manifest's search parameters marks such an index; it is
tuned with nprobe (`tune_rescoring`).

An open hashes no stored vectors (30 GB at 20M rows); a part file is hashed the first time
a search reads a candidate from it, once per reader and file state.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from semsearch.ann.base import IdFilter, RereadableParts
from semsearch.ann.factory import DEFAULT_OVERSAMPLE, OVERSAMPLE, IndexSpec, is_rescoring
from semsearch.ann.metrics import INNER_PRODUCT, prepare_vectors
from semsearch.ann.tune import (
    TUNING_K,
    TuningResult,
    enforce_target,
    tune_against_exact,
    tune_index,
)
from semsearch.ann.vector_index import VectorIndex
from semsearch.errors import DamagedIndexError, SemsearchError
from semsearch.options import DEFAULT_TUNING_QUERIES
from semsearch.phases import count, phase
from semsearch.store.file_names import part_file_names
from semsearch.store.filling import sample_vectors
from semsearch.store.held_out import without
from semsearch.store.part_ids import gather
from semsearch.store.segment import Segment

log = logging.getLogger(__name__)

PartCheck = Callable[[int], None]
RESCORE_QUERIES = 64  # queries whose candidates are scored together


class SegmentVectors:
    """A segment's stored vectors gathered by id, each part file checked before its first
    read (`check(part)`; None where the caller wrote the parts itself, as a build does)."""

    def __init__(self, segment: Segment, dimension: int, check: PartCheck | None = None) -> None:
        self.segment = segment
        self.dimension = dimension
        self.check = check
        self._maps: dict[int, tuple[tuple, np.ndarray]] = {}
        self._lock = threading.Lock()

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """float32 vectors of `ids` (unique, ascending, all stored in the segment)."""
        positions = self.segment.positions_of(ids)
        if len(positions) and positions.min() < 0:
            raise DamagedIndexError(
                f"segment {self.segment.folder}: its index returned ids it does not store: "
                "rebuild the index with --overwrite"
            )
        output = np.empty((len(ids), self.dimension), np.float32)
        return gather(self.segment.part_starts, positions, self._part, output)

    def _part(self, part: int) -> np.ndarray:
        """The part's vectors, memory-mapped once per file state, checked first."""
        path = self.segment.folder / part_file_names(part)[0]
        status = os.stat(path)
        state = (status.st_ino, status.st_size, status.st_mtime_ns)
        cached = self._maps.get(part)
        if cached is not None and cached[0] == state:
            return cached[1]
        if self.check is not None:
            self.check(part)  # raises on a changed file; hashes it once per stat
        vectors = self.segment.part_vectors_for_random_reads(part)
        with self._lock:
            self._maps[part] = (state, vectors)
        return vectors


class RescoringIndex(VectorIndex):
    """A coded index whose answers are re-ranked by exact scores from the stored vectors;
    see the module docstring. A segment small enough to be searched exactly (an
    `ExactStandIn`) is passed through, with `oversample` dropped."""

    def __init__(
        self, source: VectorIndex, vectors: SegmentVectors, oversample: int = DEFAULT_OVERSAMPLE
    ) -> None:
        super().__init__(source.faiss, source.metric)
        self.source = source
        self.vectors = vectors
        self.oversample = oversample

    @property
    def size(self) -> int:
        return self.source.size  # with the rows a segment keeps out of its codes

    def with_oversample(self, oversample: int) -> RescoringIndex:
        return RescoringIndex(self.source, self.vectors, oversample)

    def keeps_exact_vectors(self) -> bool:
        return True  # the scores it returns are exact

    def search_parameters(self) -> frozenset[str]:
        return self.source.search_parameters() | {OVERSAMPLE}

    def search(
        self,
        queries: np.ndarray,
        k: int,
        params: dict[str, int] | None = None,
        allowed: IdFilter | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact scores and ids of the best `k` of max(k, TUNING_K) x oversample candidates
        from the codes."""
        params = dict(params or {})
        oversample = params.pop(OVERSAMPLE, None)
        oversample = self.oversample if oversample is None else int(oversample)
        if oversample < 1:
            raise SemsearchError(f"oversample must be at least 1, not {oversample}")
        if self.source.keeps_exact_vectors():  # an exact stand-in: nothing to rescore
            return self.source.search(queries, k, params, allowed)
        # As deep as tuning measured whatever k is asked: `-k 1` re-scoring 4 candidates
        # where `-k 10` re-scores 40 would give a worse first hit for a smaller k.
        candidates = max(k, min(self.size, max(k, TUNING_K) * oversample))
        _, ids = self.source.search(queries, candidates, params, allowed)
        with phase("rescore"):  # the candidates' stored vectors read and scored exactly
            count("rescored", int(np.sum(ids >= 0)))
            return self.rescored(queries, ids, k)

    def rescored(
        self, queries: np.ndarray, ids: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The best `k` of each query's candidate `ids` (-1 for none) by exact score
        (`semsearch.ann.exact.nearness`), RESCORE_QUERIES queries at a time."""
        scores = np.full((len(queries), k), np.nan, np.float32)
        best = np.full((len(queries), k), -1, np.int64)
        for start in range(0, len(queries), RESCORE_QUERIES):
            block = slice(start, start + RESCORE_QUERIES)
            scores[block], best[block] = self._rescored_block(queries[block], ids[block], k)
        return scores, best

    def _rescored_block(self, queries: np.ndarray, ids: np.ndarray, k: int):
        import torch  # only where a search runs

        from semsearch.ann.exact import nearness

        # FAISS fills the slots it found no candidate for with -1: they are dropped, never
        # read as a row (a segment need not store id 0).
        filled = ids >= 0
        unique, columns = np.unique(ids[filled], return_inverse=True)
        near = np.full(ids.shape, -np.inf, np.float32)
        if len(unique):
            vectors = prepare_vectors(self.vectors.gather(unique), self.metric)
            scored = nearness(torch.from_numpy(queries), torch.from_numpy(vectors), self.metric)
            near[filled] = scored.numpy()[np.nonzero(filled)[0], columns.ravel()]
        order = np.argsort(-near, axis=1, kind="stable")[:, :k]
        found = np.take_along_axis(ids, order, axis=1)
        near = np.take_along_axis(near, order, axis=1)
        scores = near if self.metric in INNER_PRODUCT else -near  # FAISS's scale
        scores = np.where(found >= 0, scores, np.nan).astype(np.float32)
        if found.shape[1] < k:
            pad = ((0, 0), (0, k - found.shape[1]))
            found = np.pad(found, pad, constant_values=-1)
            scores = np.pad(scores, pad, constant_values=np.nan)
        return scores, found


def rescoring_index(
    index: VectorIndex, spec: IndexSpec, segment: Segment, check: PartCheck | None = None
) -> VectorIndex:
    """`index` searched with rescoring where `spec` says so (else unchanged)."""
    if not is_rescoring(spec):
        return index
    oversample = int(spec.search_params.get(OVERSAMPLE) or DEFAULT_OVERSAMPLE)
    return RescoringIndex(index, SegmentVectors(segment, index.dimension, check), oversample)


# Oversampling factors tuning tries; for each, the smallest nprobe meeting the target.
OVERSAMPLE_CANDIDATES = (2, 4, 8, 16, 32)
# Reading and scoring one stored vector costs about this many code comparisons (a random
# read of a 768-byte fp16 row, against a 48-byte code look-up): tuning keeps the pair of
# least estimated cost, nprobe x rows per list + k x oversample x this.
VECTOR_READ_COST = 32


def tune_segment(
    index: VectorIndex,
    spec: IndexSpec,
    segment: Segment,
    target: float,
    k: int,
    queries: np.ndarray | None = None,
    strict: bool = False,
    sample: int = DEFAULT_TUNING_QUERIES,
) -> TuningResult:
    """Tune `index` (over `segment`) to `target` recall@k: nprobe, and for a rescoring index
    oversample with it (`tune_rescoring`), on `queries` or else on up to `sample` of the
    rows the segment keeps out of its structure (older indexes: of its rows, each left out
    of its own results); a missed target warns, or with `strict` is refused.

    The structure is measured alone, against exact search over its own rows: the held-out
    rows it is searched beside are found exactly, and counting them would flatter it (by a
    tenth of the misses where a small segment holds a tenth of its rows out)."""
    query_ids = None
    rows = int(segment.part_starts[-1])
    held = np.asarray(segment.record.held_out, dtype=np.int64)
    if queries is None:
        ids, vectors = tuning_sample(segment, index, sample)
        query_ids = None if len(held) else ids  # held-out rows are in neither side
        queries = prepare_vectors(vectors, index.metric)
    index = getattr(index, "source", index) if len(held) else index  # not its exact side
    parts = without(segment.iter_parts, held)
    if not is_rescoring(spec):
        result = tune_against_exact(index, queries, parts, target, k, query_ids)
    else:
        if segment.record.rows != rows:  # a build's segment, before its record is written
            segment = Segment(segment.folder, replace(segment.record, rows=rows))
        rescoring = rescoring_index(index, spec, segment)
        result = tune_rescoring(rescoring, queries, parts, target, k, query_ids)
    enforce_target(result, index, strict)
    return result


def tuning_sample(
    segment: Segment, index: VectorIndex, sample: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) to tune on: up to `sample` of the rows the segment keeps out of its
    structure (`semsearch.store.held_out`); in an index built before those, a sample of its
    rows, which a graph flatters (each is a node its search walks straight to)."""
    held = np.asarray(segment.record.held_out, dtype=np.int64)
    if len(held):
        held = held[:sample]
        positions = segment.positions_of(held)
        order = np.argsort(positions)
        return held[order], segment.vectors_at(positions[order])
    if index.tunable_parameter() == "efSearch":
        log.warning(
            "this graph index keeps no rows out of its graph (built before semsearch did): "
            "its own rows as queries over-claim recall; give --queries, or reindex it "
            "('semsearch reindex NAME --index-type hnsw') to keep a tuning sample out"
        )
    rows = int(segment.part_starts[-1])
    return sample_vectors(segment.iter_parts, min(sample, rows), seed=1)


def tune_rescoring(
    index: RescoringIndex,
    queries: np.ndarray,
    parts: RereadableParts,
    target: float,
    k: int,
    query_ids: np.ndarray | None,
) -> TuningResult:
    """The cheapest (nprobe, oversample) meeting `target`: for each oversample in
    OVERSAMPLE_CANDIDATES, rising, the smallest nprobe (`tune_index`) below what a smaller
    oversample needed, then the least estimated cost; where none meets it, the best recall
    reached. An oversample whose recall stops rising with nprobe is left there."""
    extra = 0 if query_ids is None else 1
    scores, exact = index.knn(queries, parts(), k + extra)
    results: dict[int, TuningResult] = {}
    ceiling = None
    for oversample in OVERSAMPLE_CANDIDATES:
        # At the nprobe a smaller oversample met the target, a larger one costs more: only
        # smaller nprobe values can pay for it.
        result = tune_index(
            index.with_oversample(oversample),
            queries,
            exact,
            target,
            k,
            query_ids,
            exact_scores=scores,
            ceiling=ceiling,
            stop_on_plateau=True,
        )
        results[oversample] = result
        if result.met:
            ceiling = result.value - 1
            if ceiling < min(index.parameter_candidates(k)):
                break
    rows_per_list = index.size / max(index.parameter_ceiling() or 1, 1)

    def cost(item: tuple[int, TuningResult]) -> float:
        oversample, result = item
        return result.value * rows_per_list + k * oversample * VECTOR_READ_COST

    met = [item for item in results.items() if item[1].met]
    oversample, best = (
        min(met, key=cost)
        if met
        else max(results.items(), key=lambda item: (item[1].recall, -cost(item)))
    )
    log.info("rescoring tuned: %s", {o: (r.value, round(r.recall, 4)) for o, r in results.items()})
    return replace(best, also={OVERSAMPLE: oversample})
