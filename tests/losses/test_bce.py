"""bce: MLP over the pair -> one logit, BCE with pos_weight."""

from __future__ import annotations

import math

import pytest
import torch

from semsearch.losses import BCEPairLoss


def test_one_step_lowers_the_loss(tiny_encoder, one_step) -> None:
    before, after = one_step(BCEPairLoss(tiny_encoder, pos_weight=2.0))
    assert after < before


def test_the_head_is_trained_with_the_encoder(tiny_encoder) -> None:
    loss = BCEPairLoss(tiny_encoder, hidden=16)
    parameters = {id(parameter) for parameter in loss.parameters()}
    assert all(id(parameter) in parameters for parameter in loss.head.parameters())
    assert loss.head[0].in_features == 3 * 32 and loss.head[0].out_features == 16
    assert loss.head[-1].out_features == 1


def _silent_head(loss: BCEPairLoss) -> None:
    for parameter in loss.head.parameters():
        torch.nn.init.zeros_(parameter)


def test_a_zero_logit_costs_log_two_times_pos_weight_on_positives(tiny_encoder) -> None:
    loss = BCEPairLoss(tiny_encoder, pos_weight=3.0)
    _silent_head(loss)
    u = torch.randn(4, 32)
    positives = loss.compute([u, u], torch.tensor([1, 1, 1, 1]))
    negatives = loss.compute([u, u], torch.tensor([0, 0, 0, 0]))
    assert positives.item() == pytest.approx(3 * math.log(2), rel=1e-6)
    assert negatives.item() == pytest.approx(math.log(2), rel=1e-6)


def test_labels_are_required(tiny_encoder) -> None:
    with pytest.raises(ValueError, match="needs labels"):
        BCEPairLoss(tiny_encoder).compute([torch.randn(2, 32)] * 2, None)
