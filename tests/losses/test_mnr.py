"""mnr: in-batch negatives, with duplicates never counted as negatives."""

from __future__ import annotations

import math

import pytest
import torch

from semsearch.losses import MultipleNegativesRankingLoss
from semsearch.losses.mnr import same_text_masks


@pytest.mark.parametrize("symmetric", [False, True])
def test_one_step_lowers_the_loss(tiny_encoder, one_step, symmetric) -> None:
    before, after = one_step(MultipleNegativesRankingLoss(tiny_encoder, symmetric=symmetric))
    assert after < before


def test_one_step_lowers_the_loss_with_hard_negatives(tiny_encoder, one_step) -> None:
    loss = MultipleNegativesRankingLoss(tiny_encoder)
    assert loss.input_columns(["anchor", "positive", "negative"])[-1] == "negative"
    before, after = one_step(loss)
    assert after < before


def test_identical_vectors_cost_log_of_the_candidate_count(tiny_encoder) -> None:
    same = torch.ones(4, 32)
    loss = MultipleNegativesRankingLoss(tiny_encoder, symmetric=True)
    assert loss.compute([same, same], None).item() == pytest.approx(math.log(4), rel=1e-6)
    with_negatives = loss.compute([same, same, same], None)  # 8 candidates forward, 4 back
    assert with_negatives.item() == pytest.approx((math.log(8) + math.log(4)) / 2, rel=1e-6)


def test_duplicate_texts_are_not_negatives(tiny_encoder) -> None:
    columns = [["a cat", "a cat", "a dog"], ["a kitten", "a kitten", "a puppy"]]
    forward, backward = same_text_masks(columns)
    assert forward.tolist() == [[False, True, False], [True, False, False], [False, False, False]]
    assert backward.tolist() == forward.tolist()
    # Every row the same text: no negatives remain, so nothing is wrong.
    loss = MultipleNegativesRankingLoss(tiny_encoder, symmetric=True)
    value = loss([["same"] * 4, ["also same"] * 4])
    assert value.item() == pytest.approx(0.0, abs=1e-6)


def test_a_hard_negative_equal_to_another_rows_positive_is_masked() -> None:
    forward, _ = same_text_masks([["q1", "q2"], ["p1", "p2"], ["p2", "n2"]])
    # Candidates: p1, p2, then the negatives p2 (row 0's) and n2 (row 1's).
    assert forward.tolist() == [[False, False, False, False], [False, False, True, False]]


def test_mask_leaves_the_right_answer(tiny_encoder) -> None:
    anchors, positives = torch.randn(3, 32), torch.randn(3, 32)
    mask = same_text_masks([["x"] * 3, ["y"] * 3])
    value = MultipleNegativesRankingLoss(tiny_encoder).compute([anchors, positives], None, mask)
    assert value.item() == pytest.approx(0.0, abs=1e-6)
