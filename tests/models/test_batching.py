"""Batch preparation: every text once, in budgeted batches, made in a background thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from semsearch.models import BiEncoder, batching
from semsearch.models.batching import (
    BatchShape,
    pad,
    plan_batches,
    prepared_batches,
    spread_order,
)


def test_plan_batches_respects_the_count_and_the_token_budget() -> None:
    lengths = np.random.default_rng(0).integers(1, 200, size=500)
    groups = plan_batches(lengths, batch_size=64, max_tokens=2048)
    rows = np.concatenate(groups)
    assert sorted(rows.tolist()) == list(range(500))
    assert np.all(np.diff(lengths[rows]) <= 0)  # longest first
    for group in groups:
        assert len(group) <= 64
        assert len(group) * lengths[group].max() <= 2048
    # Short texts share large batches: more rows per batch at the end than at the start.
    assert len(groups[-1]) > len(groups[0]) or len(groups[-1]) == 64


def test_plan_batches_keeps_a_text_longer_than_the_budget_alone() -> None:
    groups = plan_batches(np.array([300, 5, 5]), batch_size=8, max_tokens=100)
    assert [group.tolist() for group in groups] == [[0], [1, 2]]


def test_plan_batches_without_a_budget_cuts_by_count() -> None:
    groups = plan_batches(np.array([1, 2, 3, 4, 5]), batch_size=2, max_tokens=None)
    assert [group.tolist() for group in groups] == [[4, 3], [2, 1], [0]]


def test_pad_matches_a_row_by_row_padding() -> None:
    token_ids = [[5, 6, 7], [8], [], [9, 10]]
    input_ids, mask = pad(token_ids, pad_id=0)
    assert input_ids.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0], [9, 10, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0]]


def _fake_tokenize(texts):
    return [[ord(char) for char in text] for text in texts]


def test_prepared_batches_yield_every_text_once_across_chunks(monkeypatch) -> None:
    monkeypatch.setattr(batching, "SORT_CHUNK", 7)
    texts = ["x" * (1 + i % 9) for i in range(30)]
    seen = []
    for batch in prepared_batches(texts, _fake_tokenize, 0, BatchShape(4, max_tokens=12)):
        assert batch.input_ids.shape == batch.attention_mask.shape
        lengths = batch.attention_mask.sum(dim=1).tolist()
        assert lengths == [len(texts[row]) for row in batch.rows]
        seen.extend(batch.rows.tolist())
    assert sorted(seen) == list(range(30))


def test_spread_order_is_a_permutation_that_starts_at_zero() -> None:
    assert spread_order(8).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    for count in (0, 1, 2, 5, 100):
        order = spread_order(count)
        assert sorted(order.tolist()) == list(range(count)) and (count == 0 or order[0] == 0)


def test_batches_cost_the_same_per_text_all_through_a_chunk() -> None:
    """Longest first, texts/s climbed from the long texts to the short ones in every chunk
    (a bar's rate and ETA with it): each stretch of batches now holds long and short texts."""
    texts = ["x" * length for length in np.random.default_rng(0).integers(1, 200, size=2048)]
    batches = list(prepared_batches(texts, _fake_tokenize, 0, BatchShape(16)))
    assert batches[0].attention_mask.shape[1] == max(map(len, texts))  # the longest first
    tokens = np.array([int(batch.attention_mask.sum()) for batch in batches])
    quarters = [part.sum() / tokens.sum() for part in np.array_split(tokens, 4)]
    assert all(0.2 < share < 0.3 for share in quarters), quarters


def test_prepared_batches_raise_the_tokenizers_error() -> None:
    def broken(texts):
        raise ValueError("tokeniser broke")

    with pytest.raises(ValueError, match="tokeniser broke"):
        list(prepared_batches(["a", "b"], broken, 0, BatchShape(1)))


def test_leaving_early_stops_the_background_thread(monkeypatch) -> None:
    monkeypatch.setattr(batching, "QUEUE_DEPTH", 1)
    batches = prepared_batches(["a"] * 100, _fake_tokenize, 0, BatchShape(1))
    next(batches)
    batches.close()
    assert not any(thread.name == "semsearch-batches" for thread in threading.enumerate())


def test_token_budget_does_not_change_the_vectors(tiny_encoder: BiEncoder, sentences) -> None:
    by_count = tiny_encoder.encode(sentences, batch_size=3)
    by_budget = tiny_encoder.encode(sentences, batch_size=64, max_batch_tokens=40)
    np.testing.assert_allclose(by_budget, by_count, atol=1e-5)


def test_one_batch_is_prepared_inline_and_more_in_the_background() -> None:
    threads: list[str] = []

    def tokenize(texts):
        threads.append(threading.current_thread().name)
        return _fake_tokenize(texts)

    list(prepared_batches(["a", "bb"], tokenize, 0, BatchShape(4)))
    list(prepared_batches(["a", "bb", "ccc"], tokenize, 0, BatchShape(2)))
    assert threads == [threading.current_thread().name, "semsearch-batches"]


def test_pad_rounds_the_width_up_to_a_multiple() -> None:
    input_ids, mask = pad([[5, 6, 7], [8]], pad_id=0, multiple=4)
    assert input_ids.tolist() == [[5, 6, 7, 0], [8, 0, 0, 0]]
    assert mask.sum(dim=1).tolist() == [3, 1]


def test_rounded_padding_does_not_change_the_vectors(tiny_encoder: BiEncoder, sentences) -> None:
    plain = list(prepared_batches(sentences, tiny_encoder.tokenize, 0, BatchShape(4)))
    rounded = list(
        prepared_batches(sentences, tiny_encoder.tokenize, 0, BatchShape(4, pad_multiple=16))
    )
    for one, other in zip(plain, rounded):
        assert other.input_ids.shape[1] % 16 == 0
        np.testing.assert_allclose(
            tiny_encoder(other.input_ids, other.attention_mask).detach().numpy(),
            tiny_encoder(one.input_ids, one.attention_mask).detach().numpy(),
            atol=1e-5,
        )


def test_a_batch_size_below_one_is_a_user_error(tiny_encoder: BiEncoder, sentences) -> None:
    from semsearch.errors import SemsearchError

    with pytest.raises(SemsearchError, match="must be at least 1"):
        tiny_encoder.encode(sentences, batch_size=0)
