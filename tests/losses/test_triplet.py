"""triplet: the anchor must be nearer its positive than its negative, by a margin."""

from __future__ import annotations

import math

import pytest
import torch

from semsearch.losses import TripletLoss


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_one_step_lowers_the_loss(tiny_encoder, one_step, distance) -> None:
    before, after = one_step(TripletLoss(tiny_encoder, distance=distance))
    assert after < before


@pytest.mark.parametrize(
    ("distance", "margin", "expected"),
    [
        ("euclidean", 1.0, 0.0),  # sqrt(2) apart already beats a margin of 1
        ("euclidean", 2.0, 2 - math.sqrt(2)),
        ("cosine", 1.0, 0.0),  # cosine distance 1 meets a margin of 1 exactly
        ("cosine", 1.5, 0.5),
    ],
)
def test_hinge_on_hand_made_vectors(tiny_encoder, unit, distance, margin, expected) -> None:
    anchor, negative = unit([1, 0]), unit([0, 1])
    loss = TripletLoss(tiny_encoder, distance=distance, margin=margin)
    assert loss.compute([anchor, anchor, negative], None).item() == pytest.approx(
        expected, abs=1e-5
    )


def test_identical_anchor_and_positive_keep_finite_gradients(tiny_encoder) -> None:
    anchor = torch.randn(2, 32, requires_grad=True)
    TripletLoss(tiny_encoder).compute([anchor, anchor, torch.randn(2, 32)], None).backward()
    assert torch.isfinite(anchor.grad).all()


def test_needs_three_columns_and_a_known_distance(tiny_encoder) -> None:
    with pytest.raises(ValueError, match="3-3 text columns"):
        TripletLoss(tiny_encoder)([["a"], ["b"]])
    with pytest.raises(ValueError, match="distance must be"):
        TripletLoss(tiny_encoder, distance="manhattan")
