"""contrastive: matches cost d^2, non-matches max(0, margin - d)^2."""

from __future__ import annotations

import pytest
import torch

from semsearch.losses import ContrastiveLoss


@pytest.mark.parametrize("distance", ["cosine", "euclidean"])
def test_one_step_lowers_the_loss(tiny_encoder, one_step, distance) -> None:
    before, after = one_step(ContrastiveLoss(tiny_encoder, distance=distance, margin=1.0))
    assert after < before


def test_value_on_hand_made_pairs(tiny_encoder, unit) -> None:
    u = unit([1, 0], [1, 0], [1, 0], [1, 0])
    v = unit([1, 0], [0, 1], [0, 1], [1, 1])  # cosine distances 0, 1, 1, 0.2929
    labels = torch.tensor([1, 1, 0, 0])
    value = ContrastiveLoss(tiny_encoder, margin=0.5).compute([u, v], labels)
    # match at 0: 0; match at 1: 1; non-match beyond the margin: 0; non-match at 0.29: 0.2071^2
    expected = 0.5 * (0 + 1 + 0 + (0.5 - (1 - 2**-0.5)) ** 2) / 4
    assert value.item() == pytest.approx(expected, rel=1e-5)
