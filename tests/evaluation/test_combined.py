"""Several evaluators as one: the weighted mean of their primaries, every metric kept."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.evaluation.base import Evaluator
from semsearch.evaluation.combined import CombinedEvaluator


class Fixed(Evaluator):
    primary_metric = "score"

    def __init__(self, name: str, value: float) -> None:
        super().__init__(name)
        self.value = value

    def evaluate(self, encoder) -> dict[str, float]:
        return {"score": self.value, "other": -1.0}


def test_combined_is_the_weighted_mean_of_the_primaries() -> None:
    combined = CombinedEvaluator([Fixed("a", 0.8), Fixed("b", 0.5)], weights=[1, 3])
    metrics = combined(np.zeros)
    assert metrics["combined"] == pytest.approx((0.8 + 3 * 0.5) / 4)
    assert metrics["a/score"] == 0.8 and metrics["b/other"] == -1.0
    assert combined.primary(metrics) == metrics["combined"]
    assert combined.describe() == "combined = (1 x a score + 3 x b score) / 4"


@pytest.mark.parametrize(
    ("evaluators", "weights"),
    [
        ([], None),
        ([Fixed("a", 1), Fixed("a", 1)], None),
        ([Fixed("a", 1)], [0]),
        ([Fixed("a", 1)], [1, 2]),
    ],
)
def test_bad_combinations_are_refused(evaluators, weights) -> None:
    with pytest.raises(ValueError):
        CombinedEvaluator(evaluators, weights)
