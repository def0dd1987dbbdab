"""A trained pair head (`bce`, `l1-sigmoid`) judged as the classifier it is.

Why: a bi-encoder's vectors are judged by thresholding a similarity (`pairs`); a head
trained with binary cross-entropy makes its own score, a logit, and the recipes it comes
from report accuracy and F1 of that score. The thresholds are chosen on dev and applied
to test unchanged, as in `pairs`, so the two are comparable row by row.
"""

from __future__ import annotations

import numpy as np
import torch

from semsearch.errors import SemsearchError
from semsearch.evaluation.base import encode_pairs
from semsearch.evaluation.pairs import (
    LabelledPairs,
    accuracy,
    average_precision,
    best_threshold,
    confusion,
    f1,
    precision,
    recall,
)
from semsearch.losses.base import SiameseLoss
from semsearch.losses.pair_head import pair_features


def pair_logits(loss: SiameseLoss, pairs: LabelledPairs, batch_size: int = 64) -> np.ndarray:
    """The head's match logit for each pair (higher: more likely a match)."""
    first, second = encode_pairs(loss.encoder, pairs.sentence1, pairs.sentence2, batch_size)
    device = loss.encoder.device
    u, v = (torch.from_numpy(side).to(device) for side in (first, second))
    head = getattr(loss, "head", None)
    if head is None:
        raise SemsearchError(f"objective {type(loss).__name__} has no binary pair head to evaluate")
    with torch.inference_mode():
        if hasattr(loss, "logits"):
            logits = loss.logits(u, v)
        else:
            logits = head(pair_features(u, v, loss.parts)).squeeze(-1)
    return logits.float().cpu().numpy()


def evaluate_head(loss: SiameseLoss, dev: LabelledPairs, test: LabelledPairs) -> dict[str, float]:
    """Accuracy (dev-best-accuracy threshold), F1 / precision / recall (dev-best-F1
    threshold) and average precision of the head's logits on `test`."""
    was_training = loss.training
    loss.eval()
    try:
        dev_scores, test_scores = pair_logits(loss, dev), pair_logits(loss, test)
    finally:
        loss.train(was_training)
    dev_labels = np.asarray(dev.labels, dtype=np.int64)
    test_labels = np.asarray(test.labels, dtype=np.int64)
    accuracy_at = best_threshold(dev_scores, dev_labels, "accuracy")
    f1_at = best_threshold(dev_scores, dev_labels, "f1")
    counts = confusion(test_scores, test_labels, f1_at)
    return {
        "head_accuracy": accuracy(confusion(test_scores, test_labels, accuracy_at)),
        "head_accuracy_threshold": accuracy_at,
        "head_f1": f1(counts),
        "head_precision": precision(counts),
        "head_recall": recall(counts),
        "head_f1_threshold": f1_at,
        "head_ap": average_precision(test_scores, test_labels),
    }
