"""Mixing several datasets' batches: round-robin turns, proportional shares, fixed per epoch."""

from __future__ import annotations

from collections import Counter

import pytest

from semsearch.training.schedule import BatchSource, mixed_batches, mixed_steps


def _source(rows: int, duplicates: bool = False) -> BatchSource:
    texts = [f"text {row % 3 if duplicates else row}" for row in range(rows)]
    return BatchSource([texts], no_duplicates=duplicates)


def test_round_robin_takes_turns_and_stops_when_the_smallest_runs_out() -> None:
    batches = mixed_batches([_source(40), _source(12)], 4, seed=0, epoch=0, mixing="round-robin")
    assert [number for number, _ in batches] == [0, 1] * 3
    small = sorted(row for number, rows in batches if number == 1 for row in rows)
    assert small == list(range(12))  # the small dataset is used whole
    assert len({row for number, rows in batches if number == 0 for row in rows}) == 12


def test_proportional_uses_every_batch_once_in_a_shuffled_order() -> None:
    batches = mixed_batches([_source(40), _source(12)], 4, seed=0, epoch=0, mixing="proportional")
    assert Counter(number for number, _ in batches) == {0: 10, 1: 3}
    for number, size in ((0, 40), (1, 12)):
        rows = sorted(row for n, batch in batches if n == number for row in batch)
        assert rows == list(range(size))
    assert [number for number, _ in batches] != [0] * 10 + [1] * 3


def test_the_order_is_fixed_by_seed_and_epoch() -> None:
    sources = [_source(40), _source(12)]
    first = mixed_batches(sources, 4, seed=1, epoch=0, mixing="proportional")
    assert first == mixed_batches(sources, 4, seed=1, epoch=0, mixing="proportional")
    assert first != mixed_batches(sources, 4, seed=1, epoch=1, mixing="proportional")


def test_in_batch_negative_datasets_get_batches_without_repeated_texts() -> None:
    sources = [_source(12), _source(9, duplicates=True)]
    for number, rows in mixed_batches(sources, 3, seed=0, epoch=0, mixing="proportional"):
        if number == 1:
            texts = [sources[1].columns[0][row] for row in rows]
            assert len(set(texts)) == len(texts)


def test_steps_count_every_epoch_or_follow_max_steps() -> None:
    sources = [_source(40), _source(12)]
    assert mixed_steps(sources, 4, 0, epochs=2, mixing="round-robin", max_steps=None) == 12
    assert mixed_steps(sources, 4, 0, epochs=2, mixing="proportional", max_steps=None) == 26
    assert mixed_steps(sources, 4, 0, epochs=2, mixing="proportional", max_steps=5) == 5


def test_an_unknown_mixing_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown mixing"):
        mixed_batches([_source(4)], 2, 0, 0, "zigzag")
