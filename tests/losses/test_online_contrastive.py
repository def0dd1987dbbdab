"""online-contrastive: the contrastive cost of the hard pairs only."""

from __future__ import annotations

import pytest
import torch

from semsearch.losses import OnlineContrastiveLoss


def test_one_step_lowers_the_loss(tiny_encoder, one_step) -> None:
    before, after = one_step(OnlineContrastiveLoss(tiny_encoder))
    assert after < before


def test_only_hard_pairs_cost(tiny_encoder, unit) -> None:
    u = unit([1, 0], [1, 0], [1, 0], [1, 0])
    v = unit([1, 0], [1, 1], [0, 1], [1, 0.2])  # distances 0, 0.293, 1, 0.0194
    labels = torch.tensor([1, 1, 0, 0])
    value = OnlineContrastiveLoss(tiny_encoder, margin=0.5).compute([u, v], labels)
    # Hard: the match at 0.293 (farther than the closest non-match, 0.0194) and that
    # non-match (closer than the farthest match). Easy pairs cost nothing.
    far_match, near_non_match = 1 - 2**-0.5, 1 - 1 / (1 + 0.2**2) ** 0.5
    expected = (far_match**2 + (0.5 - near_non_match) ** 2) / 4
    assert value.item() == pytest.approx(expected, rel=1e-4)


def test_no_hard_pair_gives_zero_and_still_backpropagates(tiny_encoder, unit) -> None:
    u = unit([1, 0], [0, 1]).requires_grad_()
    v = unit([1, 0], [1, 0])  # the match at distance 0, the non-match at 1
    value = OnlineContrastiveLoss(tiny_encoder).compute([u, v], torch.tensor([1, 0]))
    value.backward()
    assert value.item() == 0.0 and torch.all(u.grad == 0)
