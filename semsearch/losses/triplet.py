"""`triplet`: an anchor must be closer to its positive than to its negative, by a margin."""

from __future__ import annotations

from typing import ClassVar

import torch

from semsearch.losses.base import SiameseLoss
from semsearch.losses.distances import Distance, check_distance, pair_distance
from semsearch.models import BiEncoder


class TripletLoss(SiameseLoss):
    """max(0, d(anchor, positive) - d(anchor, negative) + margin), averaged over the batch.

    Inputs: columns `anchor`, `positive`, `negative`; no labels.

    Args:
        encoder: the bi-encoder being trained.
        distance: `euclidean` (SBERT's choice) or `cosine` (1 - cosine similarity).
        margin: how much closer the positive must be; with unit vectors the Euclidean
            distance lies in [0, 2], so the default 1 asks for a clear separation.
    """

    text_columns: ClassVar[tuple[str, ...]] = ("anchor", "positive", "negative")

    def __init__(
        self, encoder: BiEncoder, distance: Distance = "euclidean", margin: float = 1.0
    ) -> None:
        super().__init__(encoder)
        self.distance: Distance = check_distance(distance)
        self.margin = margin

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        """The hinge on the difference of the two distances."""
        anchor, positive, negative = embeddings
        to_positive = pair_distance(anchor, positive, self.distance)
        to_negative = pair_distance(anchor, negative, self.distance)
        return torch.relu(to_positive - to_negative + self.margin).float().mean()
