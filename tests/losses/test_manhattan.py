"""l1-sigmoid (one sigmoid unit over |u - v|, BCE) and malstm (exp(-L1) regression)."""

from __future__ import annotations

import math

import pytest
import torch

from semsearch.losses import MaLSTMLoss, ManhattanSigmoidLoss
from semsearch.losses.manhattan import manhattan_similarity


def test_one_step_lowers_both_losses(tiny_encoder, one_step) -> None:
    for loss in (ManhattanSigmoidLoss(tiny_encoder, pos_weight=2.0), MaLSTMLoss(tiny_encoder)):
        before, after = one_step(loss)
        assert after < before


def test_manhattan_similarity_is_exp_of_minus_l1() -> None:
    u = torch.tensor([[0.0, 0.0], [1.0, 2.0]])
    v = torch.tensor([[0.0, 0.0], [0.5, 1.0]])
    assert manhattan_similarity(u, v).tolist() == pytest.approx([1.0, math.exp(-1.5)])


def test_a_zero_unit_costs_log_two_times_pos_weight_on_positives(tiny_encoder) -> None:
    loss = ManhattanSigmoidLoss(tiny_encoder, pos_weight=2.0)
    torch.nn.init.zeros_(loss.head.weight)
    torch.nn.init.zeros_(loss.head.bias)
    u = torch.randn(3, 32)
    assert loss.compute([u, u], torch.ones(3)).item() == pytest.approx(2 * math.log(2))
    assert loss.compute([u, u], torch.zeros(3)).item() == pytest.approx(math.log(2))


def test_malstm_is_zero_when_the_similarity_is_the_score(tiny_encoder) -> None:
    u = torch.zeros(2, 32)
    v = torch.zeros(2, 32)
    v[1, 0] = math.log(2)  # exp(-log 2) = 0.5
    assert MaLSTMLoss(tiny_encoder).compute(
        [u, v], torch.tensor([1.0, 0.5])
    ).item() == pytest.approx(0.0, abs=1e-12)
