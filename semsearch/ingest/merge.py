"""Merging segments' live rows into one new segment, part by part, in bounded memory.

Why part by part: `compact` and `reindex` copy every live row, and an index of 20 million
rows has gigabytes of metadata. Each segment's ids ascend, so the merged ids (ascending,
as a segment's must) come from a k-way merge: every step takes the next `part_rows`
smallest live ids over all segments and copies their vectors and metadata rows.

Memory: per segment, its deleted ids (8 bytes each), a window of at most `part_rows` ids
and positions, and the one metadata part being read; plus the output part.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from semsearch.store.segment import Segment, SegmentWriter


class LiveCursor:
    """A segment's live rows in id order: (ids, positions) windows read one part at a time."""

    def __init__(self, segment: Segment) -> None:
        self.segment = segment
        self.deleted = np.asarray(segment.deleted_ids(), dtype=np.int64)
        self._next_part, self._start = 0, 0  # the next part to read, its first position
        self.ids, self.positions = np.empty(0, np.int64), np.empty(0, np.int64)
        self._table: tuple[int, pa.Table] | None = None  # the metadata part last read
        self._starts = np.cumsum([0, *(len(ids) for ids in segment.part_ids)])

    def fill(self, rows: int) -> None:
        """Read parts until at least `rows` live rows are waiting, or the segment ends."""
        while len(self.ids) < rows and self._next_part < self.segment.record.parts:
            ids = np.asarray(self.segment.part_ids[self._next_part], dtype=np.int64)
            live = ~np.isin(ids, self.deleted)
            self.ids = np.concatenate([self.ids, ids[live]])
            self.positions = np.concatenate([self.positions, self._start + np.flatnonzero(live)])
            self._start += len(ids)
            self._next_part += 1

    def take_through(self, bound: int) -> tuple[np.ndarray, np.ndarray]:
        """The waiting rows with ids up to `bound`, removed from the window."""
        count = int(np.searchsorted(self.ids, bound, side="right"))
        taken = self.ids[:count], self.positions[:count]
        self.ids, self.positions = self.ids[count:], self.positions[count:]
        return taken

    def metadata_at(self, positions: np.ndarray) -> pa.Table:
        """Metadata rows at ascending `positions`, reading each part once (it keeps the last)."""
        cuts = np.searchsorted(positions, self._starts)
        tables = []
        for part in np.unique(np.searchsorted(self._starts, positions, side="right") - 1):
            if self._table is None or self._table[0] != part:
                self._table = (int(part), self.segment.part_metadata(int(part)))
            local = positions[cuts[part] : cuts[part + 1]] - self._starts[part]
            tables.append(self._table[1].take(pa.array(local)))
        return pa.concat_tables(tables, promote_options="permissive")


def merged_parts(
    segments: list[Segment], part_rows: int
) -> Iterator[tuple[np.ndarray, list[tuple[int, np.ndarray, np.ndarray]]]]:
    """Each output part's ids (ascending) and, per segment holding some of them, (segment
    number, where they go in the part, their positions in the segment)."""
    cursors = [LiveCursor(segment) for segment in segments]
    while True:
        for cursor in cursors:
            cursor.fill(part_rows)
        waiting = [cursor.ids[:part_rows] for cursor in cursors if len(cursor.ids)]
        if not waiting:
            return
        candidates = np.concatenate(waiting)
        # A live id is in one segment only: the part_rows smallest end at this bound.
        bound = np.partition(candidates, min(part_rows, len(candidates)) - 1)[
            min(part_rows, len(candidates)) - 1
        ]
        pieces = [(number, *cursor.take_through(bound)) for number, cursor in enumerate(cursors)]
        ids = np.concatenate([piece[1] for piece in pieces])
        order = np.argsort(ids, kind="stable")
        slot = np.empty(len(ids), np.int64)
        slot[order] = np.arange(len(ids))
        owned, start = [], 0
        for number, piece_ids, positions in pieces:
            if len(piece_ids):
                owned.append((number, slot[start : start + len(piece_ids)], positions))
            start += len(piece_ids)
        yield ids[order], owned


def write_merged(
    segments: list[Segment], writer: SegmentWriter, dimension: int, part_rows: int
) -> int:
    """Write the live rows of `segments` as `writer`'s parts, in id order; the rows written."""
    cursors_by_number = {number: LiveCursor(segment) for number, segment in enumerate(segments)}
    rows = 0
    for part, (ids, owned) in enumerate(merged_parts(segments, part_rows)):
        vectors = np.empty((len(ids), dimension), np.float32)
        tables, slots = [], []
        for number, where, positions in owned:
            vectors[where] = segments[number].vectors_at(positions)
            tables.append(cursors_by_number[number].metadata_at(positions))
            slots.append(where)
        table = pa.concat_tables(tables, promote_options="permissive")
        back = np.argsort(np.concatenate(slots), kind="stable")
        writer.write(part, ids, vectors, table.take(pa.array(back)))
        rows += len(ids)
    return rows
