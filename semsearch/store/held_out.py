"""A tuning sample kept out of the structure, so that its recall is what a real query gets.

Why: a sampled row that is a node of an HNSW graph is found by walking straight to it and
its linked neighbours, which are its nearest rows; a real query is no node. On 150,000 PyPI
summaries efSearch tuned on such rows claimed recall@10 0.951 and gave 0.884 on other
summaries. Adding the sample after tuning does not help a later retune: a node added last
still links to its neighbours. So build, reindex and compact keep a sample of a segment's
rows out of its FAISS structure for good, tune the structure alone on it (ann-benchmarks
keeps queries apart the same way; `rescoring.tune_segment`), record its ids in the segment's record (`SegmentRecord.held_out`), and every
search scans those rows exactly beside the structure (`HeldOutIndex`: ~1,000 rows, a few
microseconds a query). A later `tune` without `--queries` tunes on the same rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from semsearch.ann.base import IdFilter, RereadableParts
from semsearch.ann.devices import FaissDevice
from semsearch.ann.factory import IndexSpec
from semsearch.ann.metrics import higher_is_better
from semsearch.ann.vector_index import VectorIndex
from semsearch.options import DEFAULT_TUNING_QUERIES

log = logging.getLogger(__name__)

# At most one row in HELD_OUT_SHARE is held out (40 of a 400-row segment), and none below
# MIN_HELD_OUT_ROWS rows: fewer would measure nothing.
HELD_OUT_SHARE = 10
MIN_HELD_OUT_ROWS = 20
HELD_OUT_SEED = 1


def held_out_count(rows: int, sample: int = DEFAULT_TUNING_QUERIES) -> int:
    """How many of a segment's `rows` to keep out of its structure for tuning."""
    return 0 if rows < MIN_HELD_OUT_ROWS else min(sample, rows // HELD_OUT_SHARE)


def draw_held_out(parts: RereadableParts, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids ascending, float32 vectors) of `count` rows drawn uniformly from the parts'
    rows whose vector no other row shares: a row with an identical twin (95,268 of PyPI's
    841,708 summaries repeat another) finds the twin at once, as a real query would not."""
    rng = np.random.default_rng(HELD_OUT_SEED)
    keys, starts, direction = [], [0], None
    for _, vectors in parts():  # one random projection tells identical vectors apart
        if direction is None:
            direction = rng.normal(size=np.shape(vectors)[1])
        keys.append(np.asarray(vectors, dtype=np.float64) @ direction)
        starts.append(starts[-1] + len(vectors))
    if not keys:
        return np.empty(0, np.int64), np.empty((0, 0), np.float32)
    _, inverse, counts = np.unique(np.concatenate(keys), return_inverse=True, return_counts=True)
    single = np.flatnonzero(counts[inverse] == 1)
    chosen = np.sort(rng.choice(single, size=min(count, len(single)), replace=False))
    ids_out, vectors_out = [], []
    for part, (ids, vectors) in enumerate(parts()):
        inside = chosen[(chosen >= starts[part]) & (chosen < starts[part + 1])] - starts[part]
        ids_out.append(np.asarray(ids)[inside])
        vectors_out.append(np.asarray(vectors[inside], dtype=np.float32))
    return np.concatenate(ids_out), np.concatenate(vectors_out)


def without(parts: RereadableParts, held: np.ndarray) -> RereadableParts:
    """The parts less the `held` ids: what goes into the structure."""

    def kept() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for ids, vectors in parts():
            keep = ~np.isin(ids, held)
            yield np.asarray(ids)[keep], np.asarray(vectors)[keep]

    return kept if len(held) else parts


def exact_side(vectors: np.ndarray, ids: np.ndarray, metric: str, dimension: int) -> VectorIndex:
    """An exact index of the held-out rows, searched beside the structure."""
    side = VectorIndex.create(IndexSpec("flat", "Flat", metric), dimension)
    side.add(np.asarray(vectors, dtype=np.float32), ids)
    return side


class HeldOutIndex(VectorIndex):
    """A segment's structure and its held-out rows searched exactly, answers merged; every
    question about the structure (its parameter, device, file) is the structure's."""

    def __init__(self, source: VectorIndex, side: VectorIndex) -> None:
        super().__init__(source.faiss, source.metric)
        self._layout = source._layout
        self.source, self.side = source, side

    @property
    def size(self) -> int:
        return self.source.size + self.side.size

    @property
    def exact_device(self) -> str:
        return self.source.exact_device

    @contextmanager
    def placed(self, device: FaissDevice) -> Iterator[VectorIndex]:
        with self.source.placed(device):
            yield self

    def tunable_parameter(self) -> str | None:
        return self.source.tunable_parameter()

    def search_parameters(self) -> frozenset[str]:
        return self.source.search_parameters()

    def parameter_candidates(self, k: int) -> list[int]:
        return self.source.parameter_candidates(k)

    def parameter_ceiling(self) -> int | None:
        return self.source.parameter_ceiling()

    def keeps_exact_vectors(self) -> bool:
        return self.source.keeps_exact_vectors()

    def write(self, path) -> int:
        return self.source.write(path)  # the held-out rows live in the record, not the file

    def search(
        self,
        queries: np.ndarray,
        k: int,
        params: dict[str, int] | None = None,
        allowed: IdFilter | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        scores, ids = self.source.search(queries, k, params, allowed)
        side_scores, side_ids = self.side.search(queries, min(k, self.side.size), None, allowed)
        return merged(np.hstack([scores, side_scores]), np.hstack([ids, side_ids]), k, self.metric)


def merged(
    scores: np.ndarray, ids: np.ndarray, k: int, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """The best `k` of each line; -1 (no result) last."""
    better_high = higher_is_better(metric)
    keyed = np.where(ids >= 0, scores, -np.inf if better_high else np.inf)
    order = np.argsort(-keyed if better_high else keyed, axis=1, kind="stable")[:, :k]
    best_ids = np.take_along_axis(ids, order, axis=1)
    best_scores = np.take_along_axis(scores, order, axis=1)
    return np.where(best_ids >= 0, best_scores, np.nan).astype(np.float32), best_ids


# Rows changed since tuning (added in untuned segments, deleted from tuned ones), as a share
# of the rows tuned on, past which a change says how to tune the index again.
RETUNE_SHARE = 1.0


def changed_share(segments) -> float:
    """Rows changed since the index was tuned over the rows tuned (0 for an index never
    tuned on held-out rows): a segment that holds rows out was tuned, the others were added."""
    tuned = [record for record in segments if record.held_out]
    base = sum(record.rows for record in tuned)
    if not base:
        return 0.0
    added = sum(record.live_rows for record in segments if not record.held_out)
    return (added + sum(record.deleted for record in tuned)) / base


def warn_when_drifted(name: str, before, after) -> None:
    """Once a change takes the index past RETUNE_SHARE of churn since its tuning, say which
    command measures and restores its recall: `compact` merges the segments into one and
    tunes it again on rows kept out of it."""
    if changed_share(before) < RETUNE_SHARE <= changed_share(after):
        log.warning(
            "index %r has changed more rows since it was tuned than it was tuned on: its "
            "recall may drift from the target; 'semsearch compact %s' merges its segments and "
            "tunes it again on rows kept out of it",
            name,
            name,
        )
