"""A segment's ids, looked up in its memory-mapped part files without concatenating them.

Why: holding every id in one array costs 8 bytes of anonymous memory a row, most of the
100 bytes a row a searching process may keep at 20 million rows; the part files hold the
same ids in ascending order, so a binary search answers from the page cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


class PartIds:
    """The ascending ids of a segment's parts, in place (each part memory-mapped)."""

    def __init__(self, parts: Sequence[np.ndarray]) -> None:
        self._parts = [part for part in parts if len(part)]
        lengths = [len(part) for part in self._parts]
        self._starts = np.cumsum([0, *lengths], dtype=np.int64)
        self._firsts = np.array([int(part[0]) for part in self._parts], dtype=np.int64)
        # Ascending distinct ids spanning exactly their count are first, first + 1, ...: a
        # position is then a subtraction (a search's 10-40 ids fall in as many parts, and the
        # binary search part by part cost 0.1-0.4 ms a query at 841k rows).
        self._first = int(self._firsts[0]) if self._parts else 0
        self._contiguous = bool(self._parts) and self.last - self._first + 1 == len(self)

    def __len__(self) -> int:
        return int(self._starts[-1])

    @property
    def last(self) -> int:
        """The largest id (the segment's ids are ascending); -1 for an empty segment."""
        return int(self._parts[-1][-1]) if self._parts else -1

    def positions_of(self, ids: np.ndarray) -> np.ndarray:
        """Positions of `ids` in the segment, -1 for ids it does not hold."""
        ids = np.asarray(ids, dtype=np.int64)
        positions = np.full(len(ids), -1, dtype=np.int64)
        if not self._parts or not len(ids):
            return positions
        if self._contiguous:
            offsets = ids - self._first
            inside = (offsets >= 0) & (offsets < len(self))
            positions[inside] = offsets[inside]
            return positions
        part_of = np.searchsorted(self._firsts, ids, side="right") - 1
        for part in parts_among(part_of[part_of >= 0]):
            chosen = np.flatnonzero(part_of == part)
            stored = self._parts[part]
            inside = np.minimum(np.searchsorted(stored, ids[chosen]), len(stored) - 1)
            found = np.asarray(stored[inside]) == ids[chosen]
            positions[chosen[found]] = inside[found] + self._starts[part]
        return positions

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The ids at ascending `positions` in the segment."""
        positions = np.asarray(positions, dtype=np.int64)
        output = np.empty(len(positions), dtype=np.int64)
        return gather(self._starts, positions, self._parts.__getitem__, output)


def parts_among(part_of: np.ndarray) -> list[int]:
    """The distinct part numbers in `part_of` (each >= 0), ascending: what np.unique gives,
    without importing numpy.ma (13 ms of a cold query)."""
    return np.flatnonzero(np.bincount(part_of)).tolist()


def gather(
    starts: np.ndarray,
    positions: np.ndarray,
    part: Callable[[int], np.ndarray],
    output: np.ndarray,
) -> np.ndarray:
    """`output` filled with the rows at ascending `positions` of parts that start at `starts`
    (the total last), each part read (`part(number)`) only where a position falls in it."""
    cuts = np.searchsorted(positions, starts)
    for number in range(len(starts) - 1):
        low, high = cuts[number], cuts[number + 1]
        if low < high:
            output[low:high] = part(number)[positions[low:high] - starts[number]]
    return output
