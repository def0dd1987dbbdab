"""`sts`: how well similarity scores rank sentence pairs against human judgements."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats

from semsearch.evaluation.base import Evaluator, TextEncoder, encode_pairs
from semsearch.evaluation.similarity import paired_similarities


class STSEvaluator(Evaluator):
    """Spearman and Pearson correlation between gold scores and each similarity function.

    Spearman of the cosine is the figure papers report (SBERT, MTEB), hence the primary.
    """

    primary_metric = "spearman_cosine"

    def __init__(
        self,
        sentences1: Sequence[str],
        sentences2: Sequence[str],
        scores: Sequence[float],
        name: str = "sts",
        batch_size: int = 64,
    ) -> None:
        super().__init__(name, batch_size)
        if not len(sentences1) == len(sentences2) == len(scores):
            raise ValueError("sentences1, sentences2 and scores must have the same length")
        self.sentences1, self.sentences2 = list(sentences1), list(sentences2)
        self.scores = np.asarray(scores, dtype=np.float64)

    @classmethod
    def from_columns(cls, data: Mapping[str, Sequence], name: str = "sts") -> STSEvaluator:
        """From the `sentence1`, `sentence2`, `score` columns the dataset readers give."""
        return cls(data["sentence1"], data["sentence2"], data["score"], name=name)

    def evaluate(self, encoder: TextEncoder) -> dict[str, float]:
        first, second = encode_pairs(
            encoder, self.sentences1, self.sentences2, self.batch_size, self.show_progress
        )
        return sts_metrics(first, second, self.scores)


def sts_metrics(first: np.ndarray, second: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """`pearson_<similarity>` and `spearman_<similarity>` for the pairs (first[i], second[i])."""
    metrics = {}
    for similarity, predicted in paired_similarities(first, second).items():
        metrics[f"pearson_{similarity}"] = _correlation(stats.pearsonr, predicted, gold)
        metrics[f"spearman_{similarity}"] = _correlation(stats.spearmanr, predicted, gold)
    return metrics


def _correlation(function: Callable, predicted: np.ndarray, gold: np.ndarray) -> float:
    if len(gold) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return float("nan")  # a constant input (a collapsed model) has no correlation
    return float(function(predicted, gold)[0])
