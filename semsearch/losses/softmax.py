"""`softmax`: a linear classifier over (u, v, |u - v|[, u * v]), cross-entropy over N labels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import nn

from semsearch.losses.base import SiameseLoss
from semsearch.losses.pair_head import DEFAULT_PARTS, PairPart, check_parts, pair_features
from semsearch.models import BiEncoder


class SoftmaxLoss(SiameseLoss):
    """The SBERT NLI objective: classify a pair from its two sentence vectors.

    Inputs: columns `sentence1`, `sentence2`; labels `label`, class ids in [0, num_labels).
    The classifier (`self.classifier`) is a submodule, so an optimiser over
    `loss.parameters()` trains it together with the encoder; it is dropped after training.

    Args:
        encoder: the bi-encoder being trained.
        num_labels: how many classes (3 for NLI, 2 for duplicate / not).
        parts: which pair features the classifier reads, in order.
        class_weights: one weight per class for unbalanced data, or None.
    """

    label_column: ClassVar[str | None] = "label"
    label_dtype: ClassVar[torch.dtype] = torch.long

    def __init__(
        self,
        encoder: BiEncoder,
        num_labels: int,
        parts: Sequence[PairPart] = DEFAULT_PARTS,
        class_weights: Sequence[float] | None = None,
    ) -> None:
        super().__init__(encoder)
        if num_labels < 2:
            raise ValueError(f"softmax needs at least 2 labels, not {num_labels}")
        if class_weights is not None and len(class_weights) != num_labels:
            raise ValueError(f"{len(class_weights)} class weights for {num_labels} labels")
        self.num_labels = num_labels
        self.parts = check_parts(parts)
        self.classifier = nn.Linear(len(self.parts) * encoder.dimension, num_labels)
        self.classifier.to(encoder.device)
        weights = None if class_weights is None else torch.tensor(class_weights, dtype=torch.float)
        self.register_buffer("class_weights", weights, persistent=False)

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        """Cross-entropy of the classifier's logits against the class ids."""
        u, v = embeddings
        labels = self.labels_like(labels, u)
        logits = self.classifier(pair_features(u, v, self.parts))
        weights = None if self.class_weights is None else self.class_weights.to(u.device)
        return nn.functional.cross_entropy(logits.float(), labels, weight=weights)
