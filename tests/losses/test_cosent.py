"""cosent: only the order of the gold scores matters."""

from __future__ import annotations

import math

import pytest
import torch

from semsearch.losses import CoSENTLoss


def test_one_step_lowers_the_loss(tiny_encoder, one_step) -> None:
    before, after = one_step(CoSENTLoss(tiny_encoder))
    assert after < before


def test_cost_follows_the_misordered_pairs(tiny_encoder, unit) -> None:
    u = unit([1, 0], [1, 0])
    v = unit([1, 0], [0, 1])  # cosines 1 and 0
    loss = CoSENTLoss(tiny_encoder, scale=20.0)
    right = loss.compute([u, v], torch.tensor([0.9, 0.1]))
    wrong = loss.compute([u, v], torch.tensor([0.1, 0.9]))
    assert right.item() == pytest.approx(math.log1p(math.exp(-20)), abs=1e-7)
    assert wrong.item() == pytest.approx(math.log1p(math.exp(20)), rel=1e-6)


def test_only_the_order_of_the_scores_counts(tiny_encoder) -> None:
    u, v = torch.randn(5, 32), torch.randn(5, 32)
    loss = CoSENTLoss(tiny_encoder)
    scores = torch.tensor([0.1, 0.5, 0.2, 0.9, 0.3])
    assert loss.compute([u, v], scores).item() == pytest.approx(
        loss.compute([u, v], scores**3 * 7).item()
    )


def test_equal_scores_give_zero_and_a_usable_gradient(tiny_encoder) -> None:
    u = torch.randn(3, 32, requires_grad=True)
    value = CoSENTLoss(tiny_encoder).compute([u, torch.randn(3, 32)], torch.ones(3))
    value.backward()
    assert value.item() == 0.0 and torch.all(u.grad == 0)
