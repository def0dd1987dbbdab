"""The Manhattan (L1) recipes of the siamese-LSTM era: `l1-sigmoid` and `malstm`.

`l1-sigmoid` is the Keras duplicate-question recipe: the element-wise |u - v| into one
sigmoid unit, trained with binary cross-entropy. `malstm` is Mueller & Thyagarajan
(AAAI 2016): exp(-||u - v||_1), a similarity in (0, 1], regressed onto the gold score.
They are here so that semsearch can measure them beside its own objectives (issue 17).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from semsearch.losses.base import SiameseLoss
from semsearch.losses.bce import BCEPairLoss
from semsearch.models import BiEncoder


def manhattan_similarity(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """exp(-||u - v||_1) per row: 1 for identical vectors, towards 0 as they part."""
    return torch.exp(-(u - v).abs().sum(dim=1))


class ManhattanSigmoidLoss(BCEPairLoss):
    """One sigmoid unit over |u - v|: is this pair a match?

    Inputs: columns `sentence1`, `sentence2`; labels `label`, 1 for a match and 0 otherwise.
    The unit (`self.head`, a linear layer to one logit) is trained with the encoder.

    Args:
        encoder: the bi-encoder being trained.
        pos_weight: weight of positive pairs in the cross-entropy (None: 1).
    """

    def __init__(self, encoder: BiEncoder, pos_weight: float | None = None) -> None:
        super().__init__(encoder, pos_weight=pos_weight, parts=("abs_diff",))

    def _make_head(self, dimension: int, hidden: int) -> nn.Module:
        return nn.Linear(dimension, 1)


class MaLSTMLoss(SiameseLoss):
    """Make exp(-||u - v||_1) equal a gold similarity, with mean squared error.

    Inputs: columns `sentence1`, `sentence2`; labels `score`, a gold similarity in [0, 1].
    Unnormalised vectors suit it: unit vectors of 384 dimensions sit at L1 distances where
    exp(-d) is nearly 0 for every pair.
    """

    label_column: ClassVar[str | None] = "score"

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        """Mean squared error between exp(-L1) and the gold score."""
        u, v = embeddings
        labels = self.labels_like(labels, u)
        return nn.functional.mse_loss(manhattan_similarity(u.float(), v.float()), labels)
