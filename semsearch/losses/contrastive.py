"""`contrastive`: pull labelled matches together, push non-matches beyond a margin."""

from __future__ import annotations

from typing import ClassVar

import torch

from semsearch.losses.base import SiameseLoss
from semsearch.losses.distances import Distance, check_distance, pair_distance
from semsearch.models import BiEncoder


class ContrastiveLoss(SiameseLoss):
    """Hadsell et al. (2006): a match costs d^2; a non-match costs max(0, margin - d)^2.

    Inputs: columns `sentence1`, `sentence2`; labels `label`, 1 for a match and 0 otherwise.

    Args:
        encoder: the bi-encoder being trained.
        distance: `cosine` (1 - cosine similarity, in [0, 2]) or `euclidean`.
        margin: non-matches farther apart than this cost nothing.
    """

    label_column: ClassVar[str | None] = "label"

    def __init__(
        self, encoder: BiEncoder, distance: Distance = "cosine", margin: float = 0.5
    ) -> None:
        super().__init__(encoder)
        self.distance: Distance = check_distance(distance)
        self.margin = margin

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        """Half the mean over pairs of the match or non-match cost."""
        u, v = embeddings
        labels = self.labels_like(labels, u)
        distances = pair_distance(u, v, self.distance).float()
        matches = labels * distances.pow(2)
        non_matches = (1 - labels) * torch.relu(self.margin - distances).pow(2)
        return 0.5 * (matches + non_matches).mean()
