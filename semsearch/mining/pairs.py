"""Mined pairs as numpy arrays until the end: kept once (i < j), best first, then cut.

Row positions and scores stay in flat arrays (12 bytes per candidate), so a collection of
hundreds of thousands of texts with k neighbours each fits easily; texts and ids are only
attached, as Arrow columns, to the pairs that survive the cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from semsearch.disk import temporary_for
from semsearch.mining.collection import Collection, ExactGroups
from semsearch.mining.neighbours import Neighbours

PAIR_COLUMNS = ("id_a", "id_b", "text_a", "text_b", "score")


class PairAccumulator:
    """Collects candidate pairs chunk by chunk, in collection rows, as (key, score) arrays."""

    def __init__(
        self,
        rows: np.ndarray,
        row_count: int,
        threshold: float | None,
        documents: np.ndarray | None = None,
    ) -> None:
        self.rows = rows  # the collection row of each searched position, increasing
        self.row_count = row_count
        self.threshold = threshold
        # A chunked index's rows: each row's document (a code). Chunks of one document never
        # pair, and each pair of documents is kept once, by its best pair of passages.
        self.documents = documents
        self._keys: list[np.ndarray] = []
        self._scores: list[np.ndarray] = []
        # Set when workers cut their blocks to the best pairs before merging: the pairs they
        # found (one found from both sides in two blocks counts twice).
        self.found_in_blocks: int | None = None

    def add(self, chunk: Neighbours) -> None:
        found = chunk.positions >= 0
        if self.threshold is not None:
            found &= chunk.scores >= self.threshold
        queries = np.arange(chunk.start, chunk.start + len(chunk.positions))[:, None]
        queries = np.broadcast_to(queries, found.shape)[found]
        others = chunk.positions[found]
        low = self.rows[np.minimum(queries, others)]
        high = self.rows[np.maximum(queries, others)]
        scores = chunk.scores[found].astype(np.float32, copy=False)
        if self.documents is not None:
            apart = self.documents[low] != self.documents[high]
            low, high, scores = low[apart], high[apart], scores[apart]
        self._keys.append(low * self.row_count + high)
        self._scores.append(scores)

    def add_candidates(self, keys: np.ndarray, scores: np.ndarray) -> None:
        """Pairs already keyed, e.g. those `reduce` kept of a block of queries on a worker."""
        self._keys.append(np.asarray(keys, dtype=np.int64))
        self._scores.append(np.asarray(scores, dtype=np.float32))

    def reduce(self, top: int | None) -> tuple[np.ndarray, np.ndarray, int]:
        """(keys, scores) best first, each pair once with its best score, at most `top` of
        them; and how many distinct pairs there were before the cut."""
        keys = np.concatenate(self._keys) if self._keys else np.empty(0, np.int64)
        scores = np.concatenate(self._scores) if self._scores else np.empty(0, np.float32)
        self._keys, self._scores = [], []
        # A pair found from both of its sides appears twice: keep its best score once.
        keys, scores = _best_per_group(keys, scores, keys)
        if self.documents is not None:
            # Each pair of documents once, by its best pair of passages.
            documents = self.documents
            a, b = documents[keys // self.row_count], documents[keys % self.row_count]
            pair = np.minimum(a, b) * (int(documents.max()) + 1) + np.maximum(a, b)
            keys, scores = _best_per_group(keys, scores, pair)
        distinct = len(keys)
        order = np.lexsort((keys, -scores))[:top]
        return keys[order], scores[order], distinct

    def finish(self, top: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(rows_a, rows_b, scores) best first, at most `top` of them, and how many distinct pairs."""
        keys, scores, distinct = self.reduce(top)
        distinct = self.found_in_blocks if self.found_in_blocks is not None else distinct
        return keys // self.row_count, keys % self.row_count, scores, distinct


def _best_per_group(
    keys: np.ndarray, scores: np.ndarray, groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The best-scoring (key, score) of each group, in the order of the groups."""
    order = np.lexsort((-scores, groups))
    first = np.ones(len(order), dtype=bool)
    first[1:] = groups[order][1:] != groups[order][:-1]
    return keys[order][first], scores[order][first]


@dataclass(frozen=True)
class DuplicateGroups:
    """Texts that occur more than once: `text, count, ids`, the largest group first."""

    table: pa.Table

    @classmethod
    def of(cls, collection: Collection, groups: ExactGroups) -> DuplicateGroups:
        counts = groups.counts
        repeated = np.flatnonzero(counts > 1)
        repeated = repeated[np.argsort(-counts[repeated], kind="stable")]
        rank = np.full(len(counts), -1, dtype=np.int64)
        rank[repeated] = np.arange(len(repeated))
        row_rank = rank[groups.codes]
        members = np.flatnonzero(row_rank >= 0)
        members = members[np.argsort(row_rank[members], kind="stable")]
        offsets = np.concatenate([[0], np.cumsum(counts[repeated])]).astype(np.int32)
        ids = pa.ListArray.from_arrays(pa.array(offsets), collection.ids.take(pa.array(members)))
        table = pa.table(
            {
                "text": collection.texts.take(pa.array(groups.first_rows[repeated])),
                "count": pa.array(counts[repeated], pa.int64()),
                "ids": ids,
            }
        )
        return cls(table)

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def rows(self) -> int:
        """Rows that belong to a group (each group counts all its copies)."""
        return int(np.sum(self.table.column("count").to_numpy()))

    def write(self, path: Path) -> None:
        with temporary_for(path) as temporary:
            pq.write_table(self.table, temporary)


@dataclass
class MiningStats:
    """What was searched and how, and where the time went (`semsearch.phases`, as
    `PhaseReport.to_dict` gives it)."""

    rows: int
    rows_skipped: int
    searched_rows: int
    exact_duplicate_rows: int
    top_k: int
    structure: str
    phases: dict = field(default_factory=dict)
    # What a row is: a text (a corpus file, an index of sentences), a document or a passage
    # of a chunked index; for the latter two, the index's documents and passages.
    unit: str = "texts"
    documents: int | None = None
    passages: int | None = None


@dataclass
class MiningResult:
    """The mined pairs, best first: row positions and scores, with the collection's texts and ids."""

    rows_a: np.ndarray
    rows_b: np.ndarray
    scores: np.ndarray
    collection: Collection
    pairs_found: int
    stats: MiningStats
    duplicates: DuplicateGroups | None = None

    def __len__(self) -> int:
        return len(self.scores)

    def to_table(self, limit: int | None = None) -> pa.Table:
        """`id_a, id_b, text_a, text_b, score` for the first `limit` pairs (all by default);
        for documents, the texts are the passages that matched."""
        rows_a, rows_b = self.rows_a[:limit], self.rows_b[:limit]
        ids = self.collection.ids
        columns = [
            ids.take(pa.array(rows_a)),
            ids.take(pa.array(rows_b)),
            *self.collection.pair_texts(rows_a, rows_b),
            pa.array(self.scores[:limit], pa.float32()),
        ]
        return pa.table(dict(zip(PAIR_COLUMNS, columns)))

    def records(self, limit: int | None = None) -> list[dict]:
        """The first `limit` pairs as dicts with their rank, for display and JSON."""
        return [
            {"rank": rank, **record}
            for rank, record in enumerate(self.to_table(limit).to_pylist(), start=1)
        ]

    def write(self, path: Path) -> None:
        with temporary_for(path) as temporary:
            pq.write_table(self.to_table(), temporary)
