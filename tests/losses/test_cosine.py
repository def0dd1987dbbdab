"""cosine: MSE between cos(u, v) and the gold score."""

from __future__ import annotations

import pytest
import torch

from semsearch.losses import CosineLoss


def test_one_step_lowers_the_loss(tiny_encoder, one_step) -> None:
    before, after = one_step(CosineLoss(tiny_encoder))
    assert after < before


def test_value_is_the_squared_error_of_the_cosine(tiny_encoder, unit) -> None:
    u = unit([1, 0], [1, 0], [1, 1])
    v = unit([1, 0], [0, 1], [1, 0])  # cosines 1, 0 and 0.7071
    value = CosineLoss(tiny_encoder).compute([u, v], torch.tensor([1.0, 0.5, 0.0]))
    expected = (0.0 + 0.25 + 0.5) / 3
    assert value.item() == pytest.approx(expected, rel=1e-5)


def test_label_count_must_match_the_batch(tiny_encoder, unit) -> None:
    with pytest.raises(ValueError, match="3 labels for a batch of 2"):
        CosineLoss(tiny_encoder).compute([unit([1, 0], [0, 1])] * 2, torch.tensor([1.0, 0, 0]))
