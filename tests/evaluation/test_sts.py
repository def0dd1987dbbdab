"""sts: correlations of four similarity functions with gold scores."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semsearch.evaluation import STSEvaluator, sts_metrics

ANGLES = np.radians([0, 20, 45, 70, 90])


def _pairs_at(angles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors whose cosine falls as the angle grows."""
    first = np.tile([1.0, 0.0], (len(angles), 1))
    second = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return first, second


def test_a_perfect_ranking_scores_one_and_a_reversed_one_minus_one() -> None:
    first, second = _pairs_at(ANGLES)
    gold = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    metrics = sts_metrics(first, second, gold)
    assert set(metrics) == {
        f"{kind}_{similarity}"
        for kind in ("pearson", "spearman")
        for similarity in ("cosine", "dot", "euclidean", "manhattan")
    }
    for similarity in ("cosine", "dot", "euclidean", "manhattan"):
        assert metrics[f"spearman_{similarity}"] == pytest.approx(1.0)
    assert sts_metrics(first, second, -gold)["spearman_cosine"] == pytest.approx(-1.0)
    # Pearson sees that the cosine is not linear in the gold scores here.
    assert 0.9 < metrics["pearson_cosine"] < 1.0


def test_a_collapsed_model_has_no_correlation() -> None:
    same = np.ones((4, 3))
    assert math.isnan(sts_metrics(same, same, np.arange(4.0))["spearman_cosine"])


def test_evaluator_encodes_each_text_once_and_keeps_pair_order(table_encoder) -> None:
    first, second = _pairs_at(ANGLES[:3])
    table = {"a": first[0], "b0": second[0], "b1": second[1], "b2": second[2]}
    encoder = table_encoder(table)
    evaluator = STSEvaluator(["a", "a", "a"], ["b0", "b1", "b2"], [1.0, 0.5, 0.0], name="toy")
    metrics = evaluator(encoder)
    assert encoder.calls == [["a", "b0", "b1", "b2"]]
    assert evaluator.primary(metrics) == pytest.approx(1.0)
    assert evaluator.name == "toy" and evaluator.primary_metric == "spearman_cosine"


def test_evaluation_runs_in_eval_mode_and_restores_training(tiny_encoder) -> None:
    tiny_encoder.train()
    texts = ["one cat", "two cats", "a dog", "stocks fell"]
    evaluator = STSEvaluator(texts[:2], texts[2:], [0.2, 0.8])
    assert evaluator(tiny_encoder) == evaluator(tiny_encoder)  # no dropout while measuring
    assert tiny_encoder.training


def test_lengths_must_agree() -> None:
    with pytest.raises(ValueError, match="same length"):
        STSEvaluator(["a"], ["b", "c"], [1.0])


@pytest.mark.slow
def test_default_model_ranks_graded_pairs_like_people(default_encoder) -> None:
    pairs = [
        ("A man is playing a guitar.", "A man is playing a guitar.", 5.0),
        ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
        ("A kitten is napping on the couch.", "A cat sleeps on the sofa.", 4.2),
        ("Stock markets fell sharply on Monday.", "Shares dropped at the start of the week.", 3.8),
        ("A woman is slicing an onion.", "A woman is cutting vegetables.", 3.2),
        ("A man is playing a guitar.", "A man is playing a piano.", 2.6),
        ("A dog runs in the park.", "A child plays in the park.", 1.8),
        ("The recipe needs two eggs.", "Bake the cake for forty minutes.", 1.2),
        ("How do I compress a folder on Linux?", "The cat sleeps on the sofa.", 0.2),
        ("Stock markets fell sharply.", "A kitten is napping.", 0.0),
    ]
    first, second, gold = zip(*pairs)
    metrics = STSEvaluator(first, second, gold)(default_encoder)
    assert metrics["spearman_cosine"] > 0.85
