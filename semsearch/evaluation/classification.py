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
from semsearch.evaluation.pairs import LabelledPairs, threshold_metrics
from semsearch.losses.base import SiameseLoss


def pair_logits(loss: SiameseLoss, pairs: LabelledPairs, batch_size: int = 64) -> np.ndarray:
    """The head's match logit for each pair (higher: more likely a match)."""
    first, second = encode_pairs(loss.encoder, pairs.sentence1, pairs.sentence2, batch_size)
    if not hasattr(loss, "logits"):
        raise SemsearchError(f"objective {type(loss).__name__} has no binary pair head to evaluate")
    device = loss.encoder.device
    u, v = (torch.from_numpy(side).to(device) for side in (first, second))
    with torch.inference_mode():
        return loss.logits(u, v).float().cpu().numpy()


def evaluate_head(loss: SiameseLoss, dev: LabelledPairs, test: LabelledPairs) -> dict[str, float]:
    """Accuracy (dev-best-accuracy threshold), F1 / precision / recall (dev-best-F1
    threshold) and average precision of the head's logits on `test`."""
    was_training = loss.training
    loss.eval()
    try:
        dev_scores, test_scores = pair_logits(loss, dev), pair_logits(loss, test)
    finally:
        loss.train(was_training)
    return threshold_metrics("head", dev_scores, dev.labels, test_scores, test.labels)
