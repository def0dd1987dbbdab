"""`pairs`: binary pair classification (duplicate or not) by thresholding a similarity.

Thresholds are chosen on a dev set and applied unchanged to a test set, so the test
figures are what a deployed threshold would give, not a best case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from semsearch.evaluation.base import Evaluator, TextEncoder, encode_pairs
from semsearch.evaluation.similarity import paired_similarities


@dataclass(frozen=True)
class LabelledPairs:
    """Sentence pairs with a 0/1 label (1: same meaning, duplicate, entailment...)."""

    sentence1: Sequence[str]
    sentence2: Sequence[str]
    labels: Sequence[int]

    @classmethod
    def from_columns(cls, data: Mapping[str, Sequence], label: str = "label") -> LabelledPairs:
        return cls(data["sentence1"], data["sentence2"], data[label])


class PairClassificationEvaluator(Evaluator):
    """Accuracy, F1, precision and recall at dev-chosen thresholds, and average precision.

    Per similarity function: `<sim>_accuracy` at the threshold that maximises dev accuracy,
    `<sim>_f1` / `_precision` / `_recall` at the one that maximises dev F1, both thresholds,
    and `<sim>_ap` (threshold-free, hence the primary). Without `test`, the figures are on
    dev itself and therefore optimistic.
    """

    primary_metric = "cosine_ap"

    def __init__(
        self,
        dev: LabelledPairs,
        test: LabelledPairs | None = None,
        name: str = "pairs",
        batch_size: int = 64,
    ) -> None:
        super().__init__(name, batch_size)
        self.dev, self.test = dev, test if test is not None else dev

    def evaluate(self, encoder: TextEncoder) -> dict[str, float]:
        dev_scores = self._similarities(encoder, self.dev)
        test_scores = (
            dev_scores if self.test is self.dev else self._similarities(encoder, self.test)
        )
        metrics = {}
        for similarity, scores in test_scores.items():
            metrics.update(
                threshold_metrics(
                    similarity, dev_scores[similarity], self.dev.labels, scores, self.test.labels
                )
            )
        return metrics

    def _similarities(self, encoder: TextEncoder, pairs: LabelledPairs) -> dict[str, np.ndarray]:
        first, second = encode_pairs(
            encoder, pairs.sentence1, pairs.sentence2, self.batch_size, self.show_progress
        )
        return paired_similarities(first, second)


def threshold_metrics(
    prefix: str,
    dev_scores: np.ndarray,
    dev_labels: Sequence[int],
    test_scores: np.ndarray,
    test_labels: Sequence[int],
) -> dict[str, float]:
    """`<prefix>_accuracy` at the threshold of the best dev accuracy, `_f1` / `_precision` /
    `_recall` at that of the best dev F1, both thresholds, and `_ap` on test."""
    dev_labels = np.asarray(dev_labels, dtype=np.int64)
    test_labels = np.asarray(test_labels, dtype=np.int64)
    accuracy_at = best_threshold(dev_scores, dev_labels, "accuracy")
    f1_at = best_threshold(dev_scores, dev_labels, "f1")
    counts = confusion(test_scores, test_labels, f1_at)
    return {
        f"{prefix}_accuracy": accuracy(confusion(test_scores, test_labels, accuracy_at)),
        f"{prefix}_accuracy_threshold": accuracy_at,
        f"{prefix}_f1": f1(counts),
        f"{prefix}_precision": precision(counts),
        f"{prefix}_recall": recall(counts),
        f"{prefix}_f1_threshold": f1_at,
        f"{prefix}_ap": average_precision(test_scores, test_labels),
    }


# True positives, false positives, false negatives, true negatives.
Counts = tuple[int, int, int, int]


def confusion(scores: np.ndarray, labels: np.ndarray, threshold: float) -> Counts:
    """Counts when pairs scoring at or above `threshold` are called positive."""
    predicted, actual = scores >= threshold, labels == 1
    return (
        int(np.sum(predicted & actual)),
        int(np.sum(predicted & ~actual)),
        int(np.sum(~predicted & actual)),
        int(np.sum(~predicted & ~actual)),
    )


def accuracy(counts: Counts) -> float:
    tp, fp, fn, tn = counts
    return (tp + tn) / max(tp + fp + fn + tn, 1)


def precision(counts: Counts) -> float:
    tp, fp, _, _ = counts
    return tp / (tp + fp) if tp + fp else 0.0


def recall(counts: Counts) -> float:
    tp, _, fn, _ = counts
    return tp / (tp + fn) if tp + fn else 0.0


def f1(counts: Counts) -> float:
    tp, fp, fn, _ = counts
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def best_threshold(
    scores: np.ndarray, labels: np.ndarray, target: Literal["accuracy", "f1"]
) -> float:
    """The threshold that maximises `accuracy` or `f1` on these pairs.

    Candidates lie midway between consecutive distinct scores (and just outside the range),
    so a threshold never sits on a score; ties go to the highest threshold.
    """
    cut_scores, tp, fp = _cuts(scores, labels)
    positives, total = int(np.sum(labels == 1)), len(labels)
    # Cut 0 calls nothing positive; cut k calls the k highest distinct scores positive.
    tp, fp = np.r_[0, tp], np.r_[0, fp]
    if target == "accuracy":
        values = (tp + (total - positives - fp)) / total
    elif target == "f1":
        values = np.where(tp > 0, 2 * tp / np.maximum(tp + fp + positives, 1), 0.0)
    else:
        raise ValueError(f"target must be accuracy or f1, not {target!r}")
    candidates = np.r_[
        cut_scores[0] + 0.5, (cut_scores[:-1] + cut_scores[1:]) / 2, cut_scores[-1] - 0.5
    ]
    return float(candidates[int(np.argmax(values))])


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mean over recall steps of the precision there, ties taken together (as scikit-learn)."""
    positives = int(np.sum(labels == 1))
    if positives == 0:
        return float("nan")
    _, tp, fp = _cuts(scores, labels)
    recall_steps = np.diff(np.r_[0, tp]) / positives
    return float(np.sum(recall_steps * tp / (tp + fp)))


def _cuts(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct scores, highest first, with the true and false positives at or above each."""
    order = np.argsort(-scores, kind="stable")
    ordered, hits = scores[order], (labels[order] == 1).astype(np.int64)
    last_of_tie = np.r_[ordered[1:] != ordered[:-1], True]
    tp = np.cumsum(hits)[last_of_tie]
    fp = np.cumsum(1 - hits)[last_of_tie]
    return ordered[last_of_tie], tp, fp
