"""softmax: classifier head over (u, v, |u - v|), cross-entropy."""

from __future__ import annotations

import math

import pytest
import torch

from semsearch.losses import SoftmaxLoss


def test_one_step_lowers_the_loss(tiny_encoder, one_step) -> None:
    before, after = one_step(SoftmaxLoss(tiny_encoder, num_labels=2))
    assert after < before


def test_the_classifier_is_trained_with_the_encoder(tiny_encoder) -> None:
    loss = SoftmaxLoss(tiny_encoder, num_labels=3)
    parameters = {id(parameter) for parameter in loss.parameters()}
    assert id(loss.classifier.weight) in parameters
    assert id(next(tiny_encoder.parameters())) in parameters
    assert loss.classifier.in_features == 3 * 32 and loss.classifier.out_features == 3


def test_product_part_widens_the_classifier(tiny_encoder) -> None:
    loss = SoftmaxLoss(tiny_encoder, num_labels=3, parts=("u", "v", "abs_diff", "product"))
    assert loss.classifier.in_features == 4 * 32


def test_uninformative_classifier_costs_log_of_the_label_count(tiny_encoder) -> None:
    loss = SoftmaxLoss(tiny_encoder, num_labels=3, class_weights=[1.0, 2.0, 5.0])
    torch.nn.init.zeros_(loss.classifier.weight)
    torch.nn.init.zeros_(loss.classifier.bias)
    u = torch.randn(4, 32)
    value = loss.compute([u, u], torch.tensor([0, 1, 2, 2]))
    assert value.item() == pytest.approx(math.log(3), abs=1e-6)


def test_class_weights_change_what_costs_most(tiny_encoder) -> None:
    plain = SoftmaxLoss(tiny_encoder, num_labels=2)
    weighted = SoftmaxLoss(tiny_encoder, num_labels=2, class_weights=[1.0, 10.0])
    weighted.classifier.load_state_dict(plain.classifier.state_dict())
    u, v = torch.randn(4, 32), torch.randn(4, 32)
    labels = torch.tensor([0, 0, 0, 1])
    logits = plain.classifier(torch.cat([u, v, (u - v).abs()], dim=1))
    per_row = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    expected = (per_row * torch.tensor([1.0, 1.0, 1.0, 10.0])).sum() / 13
    assert weighted.compute([u, v], labels).item() == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"num_labels": 1}, "at least 2"), ({"num_labels": 3, "class_weights": [1, 2]}, "2 class")],
)
def test_rejects_bad_label_settings(tiny_encoder, options, message) -> None:
    with pytest.raises(ValueError, match=message):
        SoftmaxLoss(tiny_encoder, **options)
