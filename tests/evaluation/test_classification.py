"""A pair head judged as a classifier: thresholds from dev, figures on test."""

from __future__ import annotations

import pytest
import torch

from semsearch.errors import SemsearchError
from semsearch.evaluation.classification import evaluate_head
from semsearch.evaluation.pairs import LabelledPairs
from semsearch.losses import BCEPairLoss, CosineLoss, ManhattanSigmoidLoss

TEXTS = ["a red car", "the stock market fell", "a cat sleeps", "compress a folder", "play chess"]


def _pairs(shift: int) -> LabelledPairs:
    """Each text with itself (a match) and with another text (not a match)."""
    same = [(text, text, 1) for text in TEXTS]
    other = [(text, TEXTS[(i + shift) % len(TEXTS)], 0) for i, text in enumerate(TEXTS)]
    first, second, labels = zip(*(same + other))
    return LabelledPairs(list(first), list(second), list(labels))


def test_a_head_that_separates_the_pairs_scores_one(tiny_encoder) -> None:
    loss = ManhattanSigmoidLoss(tiny_encoder)
    with torch.no_grad():  # logit = 1e-3 - ||u - v||_1: positive only for identical texts
        loss.head.weight.fill_(-1.0)
        loss.head.bias.fill_(1e-3)
    metrics = evaluate_head(loss, _pairs(1), _pairs(2))
    assert metrics["head_accuracy"] == metrics["head_f1"] == metrics["head_ap"] == 1.0
    assert metrics["head_precision"] == metrics["head_recall"] == 1.0


def test_the_bce_pair_head_is_measured_and_left_in_its_mode(tiny_encoder) -> None:
    loss = BCEPairLoss(tiny_encoder, pos_weight=2.0)
    loss.train()
    metrics = evaluate_head(loss, _pairs(1), _pairs(2))
    assert 0.0 <= metrics["head_accuracy"] <= 1.0 and 0.0 < metrics["head_ap"] <= 1.0
    assert loss.training


def test_an_objective_without_a_binary_head_is_one_line(tiny_encoder) -> None:
    with pytest.raises(SemsearchError, match="has no binary pair head"):
        evaluate_head(CosineLoss(tiny_encoder), _pairs(1), _pairs(2))
