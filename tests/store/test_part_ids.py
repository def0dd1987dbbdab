"""Ids found in their parts in place: the positions one concatenated array would give."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.store.part_ids import PartIds


@pytest.mark.parametrize("contiguous", [False, True], ids=["gaps", "one-run"])
def test_positions_and_ids_equal_those_of_the_concatenated_ids(contiguous: bool) -> None:
    """Ids with gaps are searched part by part; one unbroken run of ids (a segment as built)
    by subtraction: both as the concatenated array would answer."""
    rng = np.random.default_rng(0)
    if contiguous:
        ids = np.arange(500, 800, dtype=np.int64)
    else:
        ids = np.sort(rng.choice(1000, 300, replace=False)).astype(np.int64)
    parts = np.split(ids, [7, 7, 100, 101, 250])  # one empty part, one of one id
    lookup = PartIds(parts)
    assert len(lookup) == 300 and lookup.last == ids[-1]
    asked = np.concatenate([ids[::-1], [-1, -5, 1001, ids[0] - 1], rng.integers(0, 1000, 200)])
    expected = np.searchsorted(ids, asked)
    found = (expected < len(ids)) & (ids[np.minimum(expected, len(ids) - 1)] == asked)
    assert lookup.positions_of(asked).tolist() == np.where(found, expected, -1).tolist()
    positions = np.sort(rng.choice(300, 50, replace=False))
    assert lookup.at(positions).tolist() == ids[positions].tolist()


def test_an_empty_segment_finds_nothing() -> None:
    lookup = PartIds([])
    assert len(lookup) == 0 and lookup.last == -1
    assert lookup.positions_of(np.array([0, 3])).tolist() == [-1, -1]
