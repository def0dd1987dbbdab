"""`combined`: several evaluators as one, so that one number can pick a checkpoint.

A model trained for two tasks (STS similarity and retrieval, say) is kept where the
weighted mean of the evaluators' primary metrics is highest: a checkpoint that gains on
STS-B dev but loses more on an IR dev split is not kept. Every evaluator's own metrics are
reported too, as `NAME/metric`.
"""

from __future__ import annotations

from collections.abc import Sequence

from semsearch.evaluation.base import Evaluator, TextEncoder

COMBINED = "combined"


class CombinedEvaluator(Evaluator):
    """Runs each evaluator; `combined` (the primary) is the weighted mean of their primaries.

    Args:
        evaluators: the evaluators, each with a distinct `name`.
        weights: one positive weight per evaluator (default: all 1).
        name: how reports name the whole.
    """

    primary_metric = COMBINED

    def __init__(
        self,
        evaluators: Sequence[Evaluator],
        weights: Sequence[float] | None = None,
        name: str = "dev",
    ) -> None:
        super().__init__(name)
        if not evaluators:
            raise ValueError("CombinedEvaluator needs at least one evaluator")
        names = [evaluator.name for evaluator in evaluators]
        if len(set(names)) != len(names):
            raise ValueError(f"the evaluators' names must differ: {names}")
        self.evaluators = list(evaluators)
        self.weights = [1.0] * len(evaluators) if weights is None else [float(w) for w in weights]
        if len(self.weights) != len(self.evaluators) or min(self.weights) <= 0:
            raise ValueError("give one positive weight per evaluator")

    def evaluate(self, encoder: TextEncoder) -> dict[str, float]:
        metrics: dict[str, float] = {}
        total = 0.0
        for evaluator, weight in zip(self.evaluators, self.weights):
            measured = evaluator.evaluate(encoder)
            metrics.update({f"{evaluator.name}/{key}": value for key, value in measured.items()})
            total += weight * evaluator.primary(measured)
        metrics[COMBINED] = total / sum(self.weights)
        return metrics

    def describe(self) -> str:
        """`combined = (1 x stsb-dev spearman_cosine + 1 x debian-dev ndcg@10) / 2`."""
        parts = " + ".join(
            f"{weight:g} x {evaluator.name} {evaluator.primary_metric}"
            for evaluator, weight in zip(self.evaluators, self.weights)
        )
        return f"{COMBINED} = ({parts}) / {sum(self.weights):g}"
