"""NoDuplicatesBatchSampler: no text twice in a batch, every row once per epoch."""

from __future__ import annotations

import pytest

from semsearch.losses import NoDuplicatesBatchSampler

# Row 0, 3 and 6 share "shared"; rows 1 and 4 share "twin".
ANCHORS = ["shared", "a1", "a2", "shared", "twin", "a5", "shared", "a7", "a8", "a9"]
POSITIVES = ["p0", "twin", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"]


def _batches(**options) -> list[list[int]]:
    return list(NoDuplicatesBatchSampler([ANCHORS, POSITIVES], **options))


@pytest.mark.parametrize("seed", range(5))
def test_no_batch_repeats_a_text_and_no_row_is_lost(seed) -> None:
    batches = _batches(batch_size=4, seed=seed)
    for batch in batches:
        texts = [ANCHORS[row] for row in batch] + [POSITIVES[row] for row in batch]
        assert len(texts) == len(set(texts))
    assert sorted(row for batch in batches for row in batch) == list(range(10))


def test_length_is_exact_and_drop_last_keeps_only_full_batches() -> None:
    sampler = NoDuplicatesBatchSampler([ANCHORS, POSITIVES], batch_size=4, drop_last=True)
    batches = list(sampler)
    assert len(sampler) == len(batches)
    assert all(len(batch) == 4 for batch in batches)


def test_epochs_reshuffle_and_a_seed_repeats() -> None:
    sampler = NoDuplicatesBatchSampler([ANCHORS, POSITIVES], batch_size=3, seed=7)
    first = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first
    sampler.set_epoch(0)
    assert list(sampler) == first == _batches(batch_size=3, seed=7)


def test_rows_that_all_clash_still_come_out_one_per_batch() -> None:
    batches = list(NoDuplicatesBatchSampler([["same"] * 3], batch_size=3))
    assert sorted(len(batch) for batch in batches) == [1, 1, 1]


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        NoDuplicatesBatchSampler([ANCHORS], batch_size=0)
    with pytest.raises(ValueError, match="same length"):
        NoDuplicatesBatchSampler([ANCHORS, POSITIVES[:3]], batch_size=2)
