"""`cosine`: regress the cosine similarity of a pair onto its gold score with MSE."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.nn import functional

from semsearch.losses.base import SiameseLoss


class CosineLoss(SiameseLoss):
    """Make cos(u, v) equal a gold similarity, as SBERT fine-tunes on STS-B.

    Inputs: columns `sentence1`, `sentence2`; labels `score`, a gold similarity in [0, 1]
    (STS-B's 0-5 divided by 5).
    """

    label_column: ClassVar[str | None] = "score"

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        """Mean squared error between cos(u, v) and the gold score."""
        u, v = embeddings
        labels = self.labels_like(labels, u)
        return functional.mse_loss(functional.cosine_similarity(u, v).float(), labels)
