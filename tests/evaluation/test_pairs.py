"""pairs: thresholds chosen on dev, applied to test; precision-recall figures by hand."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.evaluation import LabelledPairs, PairClassificationEvaluator
from semsearch.evaluation.pairs import average_precision, best_threshold, confusion, f1


def test_separable_scores_get_the_midpoint_threshold() -> None:
    scores = np.array([0.9, 0.8, 0.3, 0.1])
    labels = np.array([1, 1, 0, 0])
    assert best_threshold(scores, labels, "accuracy") == pytest.approx(0.55)
    assert best_threshold(scores, labels, "f1") == pytest.approx(0.55)


def test_accuracy_and_f1_can_want_different_thresholds() -> None:
    scores = np.linspace(1.0, 0.1, 10)
    labels = np.array([1, 1, 0, 1, 0, 1, 0, 0, 0, 0])
    # Calling the top 2, 4 or 6 positive all give accuracy 0.8 (ties go to the highest
    # threshold); F1 rises from 0.667 to 0.75 to 0.8 and is best at the top 6.
    assert best_threshold(scores, labels, "accuracy") == pytest.approx(0.85)
    assert best_threshold(scores, labels, "f1") == pytest.approx(0.45)
    assert f1(confusion(scores, labels, 0.45)) == pytest.approx(0.8)


def test_average_precision_by_hand() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    assert average_precision(scores, np.array([1, 0, 1, 0])) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision(scores, np.array([1, 1, 0, 0])) == pytest.approx(1.0)
    # Tied scores are one step: both at precision 1/2.
    tied = np.array([0.5, 0.5])
    assert average_precision(tied, np.array([1, 0])) == pytest.approx(0.5)


def test_average_precision_agrees_with_scikit_learn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    scores = np.round(rng.random(200), 2)  # rounding makes ties
    labels = (rng.random(200) < scores).astype(int)
    assert average_precision(scores, labels) == pytest.approx(
        metrics.average_precision_score(labels, scores)
    )


def test_dev_threshold_is_applied_unchanged_to_test(table_encoder, unit_vectors) -> None:
    encoder = table_encoder(unit_vectors)
    # Dev: cosines 1.0 and 0.8 are matches, 0.4 and 0.0 not -> threshold 0.6.
    dev = LabelledPairs(["x", "x", "x", "x"], ["c10", "c08", "c04", "c00"], [1, 1, 0, 0])
    # Test: a match at 0.5 falls under the dev threshold; a non-match at 0.7 above it.
    test = LabelledPairs(["x", "x", "x", "x"], ["c10", "c05", "c07", "c00"], [1, 1, 0, 0])
    evaluator = PairClassificationEvaluator(dev, test)
    metrics = evaluator(encoder)
    assert metrics["cosine_accuracy_threshold"] == pytest.approx(0.6)
    assert metrics["cosine_accuracy"] == pytest.approx(0.5)
    assert metrics["cosine_precision"] == pytest.approx(0.5)
    assert metrics["cosine_recall"] == pytest.approx(0.5)
    assert metrics["cosine_f1"] == pytest.approx(0.5)
    # Ranked 1.0, 0.7, 0.5, 0.0 with matches first and third: AP (1 + 2/3) / 2.
    assert evaluator.primary(metrics) == pytest.approx((1 + 2 / 3) / 2)
    # Without a test set the figures are dev's own, at its best threshold.
    assert PairClassificationEvaluator(dev)(encoder)["cosine_accuracy"] == 1.0


@pytest.fixture()
def unit_vectors() -> dict[str, list[float]]:
    """'x' = (1, 0); 'cNN' = a unit vector at cosine 0.NN from it."""
    vectors = {"x": [1.0, 0.0]}
    for cosine in (1.0, 0.8, 0.7, 0.5, 0.4, 0.0):
        vectors[f"c{round(cosine * 10):02d}"] = [cosine, float(np.sqrt(1 - cosine**2))]
    return vectors
