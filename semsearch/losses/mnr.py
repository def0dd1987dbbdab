"""`mnr`: multiple-negatives ranking, every other positive in the batch is a negative."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from torch.nn import functional

from semsearch.losses.base import SiameseLoss, TextColumns
from semsearch.losses.distances import cosine_matrix
from semsearch.models import BiEncoder


class MultipleNegativesRankingLoss(SiameseLoss):
    """Each anchor must pick its own positive among all the batch's candidates (Henderson
    et al. 2017): cross-entropy over scaled cosines. It needs only positive pairs, and a
    larger batch gives more negatives.

    A candidate whose text equals the anchor's or its positive's (a duplicate row in the
    batch) is not counted as a negative; `NoDuplicatesBatchSampler` keeps such rows apart.

    Inputs: columns `anchor`, `positive` and optionally `negative` (a hard negative per
    row, added to every anchor's candidates); no labels.

    Args:
        encoder: the bi-encoder being trained.
        scale: multiplies the cosines (a temperature of 1 / scale).
        symmetric: also make each positive pick its anchor among the batch's anchors.
    """

    text_columns: ClassVar[tuple[str, ...]] = ("anchor", "positive")
    optional_text_columns: ClassVar[tuple[str, ...]] = ("negative",)

    def __init__(self, encoder: BiEncoder, scale: float = 20.0, symmetric: bool = False) -> None:
        super().__init__(encoder)
        self.scale = scale
        self.symmetric = symmetric

    def forward(self, columns: TextColumns, labels: torch.Tensor | None = None) -> torch.Tensor:
        return self.compute(self.embed(columns), labels, same_text=same_text_masks(columns))

    def compute(
        self,
        embeddings: list[torch.Tensor],
        labels: torch.Tensor | None = None,
        same_text: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Cross-entropy where row i's right answer is candidate i (its positive)."""
        anchors, positives = embeddings[0], embeddings[1]
        candidates = torch.cat(embeddings[1:])  # positives first, then any hard negatives
        targets = torch.arange(len(anchors), device=anchors.device)
        scores = cosine_matrix(anchors, candidates).float() * self.scale
        if same_text is not None:
            scores = _exclude(scores, same_text[0])
        loss = functional.cross_entropy(scores, targets)
        if not self.symmetric:
            return loss
        backward = cosine_matrix(positives, anchors).float() * self.scale
        if same_text is not None:
            backward = _exclude(backward, same_text[1])
        return (loss + functional.cross_entropy(backward, targets)) / 2


def same_text_masks(columns: TextColumns) -> tuple[torch.Tensor, torch.Tensor]:
    """Which off-diagonal candidates repeat row i's anchor or positive text.

    Returns masks for anchor -> candidates [n, n * (columns - 1)] and for
    positive -> anchors [n, n]; those scores must not count as negatives.
    """
    anchors, positives = columns[0], columns[1]
    candidates = [text for column in columns[1:] for text in column]
    return _repeats(anchors, positives, candidates), _repeats(anchors, positives, anchors)


def _repeats(
    anchors: Sequence[str], positives: Sequence[str], others: Sequence[str]
) -> torch.Tensor:
    where: dict[str, list[int]] = {}
    for column, text in enumerate(others):
        where.setdefault(text, []).append(column)
    mask = torch.zeros(len(anchors), len(others), dtype=torch.bool)
    for row, own in enumerate(zip(anchors, positives)):
        for column in {column for text in own for column in where.get(text, ())}:
            mask[row, column] = column != row
    return mask


def _exclude(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return scores.masked_fill(mask.to(scores.device), torch.finfo(scores.dtype).min)
