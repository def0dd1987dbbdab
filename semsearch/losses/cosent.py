"""`cosent`: the ranking form of the cosine objective (CoSENT, Su 2022)."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.nn import functional

from semsearch.losses.base import SiameseLoss
from semsearch.models import BiEncoder


class CoSENTLoss(SiameseLoss):
    """Only the order of the gold scores matters: a pair with a higher gold score must get a
    higher cosine than every pair with a lower one. It fits STS data better than MSE, which
    also forces the cosine to an absolute value.

    Inputs: columns `sentence1`, `sentence2`; labels `score`, any real-valued similarity.

    Args:
        encoder: the bi-encoder being trained.
        scale: multiplies the cosines before the soft-max over wrongly ordered pairs.
    """

    label_column: ClassVar[str | None] = "score"

    def __init__(self, encoder: BiEncoder, scale: float = 20.0) -> None:
        super().__init__(encoder)
        self.scale = scale

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        """log(1 + sum over pairs (i, j) with gold_i < gold_j of exp(scale * (cos_i - cos_j)))."""
        u, v = embeddings
        labels = self.labels_like(labels, u)
        cosines = functional.cosine_similarity(u, v).float() * self.scale
        differences = cosines[:, None] - cosines[None, :]  # [i, j] = cos_i - cos_j
        wrongly_ordered_if_positive = labels[:, None] < labels[None, :]
        differences = differences[wrongly_ordered_if_positive]
        # The leading zero is the "1 +" inside the log; it also makes an empty batch give 0.
        return torch.logsumexp(torch.cat([differences.new_zeros(1), differences]), dim=0)
