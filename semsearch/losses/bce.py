"""`bce`: (u, v, |u - v|) -> small MLP -> one logit, binary cross-entropy with `pos_weight`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import nn

from semsearch.losses.base import SiameseLoss
from semsearch.losses.pair_head import DEFAULT_PARTS, PairPart, check_parts, pair_features
from semsearch.models import BiEncoder


class BCEPairLoss(SiameseLoss):
    """A binary pair head: is this pair a match? One logit from an MLP over the pair.

    Inputs: columns `sentence1`, `sentence2`; labels `label`, 1 for a match and 0 otherwise.
    The MLP (`self.head`) is a submodule, so `loss.parameters()` covers it and the encoder.

    Args:
        encoder: the bi-encoder being trained.
        hidden: width of the MLP's hidden layer (default: the encoder's dimension).
        pos_weight: weight of positive pairs (negatives / positives balances a skewed set).
        parts: which pair features the MLP reads, in order.
    """

    label_column: ClassVar[str | None] = "label"

    def __init__(
        self,
        encoder: BiEncoder,
        hidden: int | None = None,
        pos_weight: float | None = None,
        parts: Sequence[PairPart] = DEFAULT_PARTS,
    ) -> None:
        super().__init__(encoder)
        self.parts = check_parts(parts)
        self.head = self._make_head(encoder.dimension, hidden or encoder.dimension)
        self.head.to(encoder.device)
        weight = None if pos_weight is None else torch.tensor([float(pos_weight)])
        self.register_buffer("pos_weight", weight, persistent=False)

    def _make_head(self, dimension: int, hidden: int) -> nn.Module:
        return nn.Sequential(
            nn.Linear(len(self.parts) * dimension, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def logits(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The match logit of each pair: [batch]."""
        return self.head(pair_features(u, v, self.parts)).squeeze(-1).float()

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        """Binary cross-entropy of the head's logit against the 0/1 label."""
        u, v = embeddings
        labels = self.labels_like(labels, u)
        weight = None if self.pos_weight is None else self.pos_weight.to(u.device)
        return nn.functional.binary_cross_entropy_with_logits(
            self.logits(u, v), labels, pos_weight=weight
        )
