"""What every siamese loss shares: the encoder, the columns it reads, and how it embeds them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

import torch
from torch import nn

from semsearch.models import BiEncoder

TextColumns = Sequence[Sequence[str]]


class SiameseLoss(nn.Module):
    """Base of all objectives: `loss(columns, labels)` embeds each text column, then scores.

    Subclasses declare the columns they read (`text_columns`, then `optional_text_columns`,
    then `label_column`) and implement `compute`, which works on sentence vectors only, so
    it also serves vectors that do not come from this encoder (an adapter's outputs).
    """

    text_columns: ClassVar[tuple[str, ...]] = ("sentence1", "sentence2")
    optional_text_columns: ClassVar[tuple[str, ...]] = ()
    label_column: ClassVar[str | None] = None
    label_dtype: ClassVar[torch.dtype] = torch.float32

    def __init__(self, encoder: BiEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, columns: TextColumns, labels: torch.Tensor | None = None) -> torch.Tensor:
        """The mean loss of a batch: `columns` in `text_columns` order, `labels` one per row."""
        return self.compute(self.embed(columns), labels)

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def embed(self, columns: TextColumns) -> list[torch.Tensor]:
        """One differentiable [batch, dim] tensor per text column."""
        self._check_columns(columns)
        return [self.encoder(*self.encoder.features(texts)) for texts in columns]

    def labels_like(self, labels: torch.Tensor | None, vectors: torch.Tensor) -> torch.Tensor:
        """`labels` as a 1-D tensor of this loss's dtype, on the vectors' device."""
        if labels is None:
            raise ValueError(f"{type(self).__name__} needs labels (column {self.label_column!r})")
        labels = torch.as_tensor(labels).to(vectors.device, self.label_dtype).reshape(-1)
        if len(labels) != len(vectors):
            raise ValueError(f"{len(labels)} labels for a batch of {len(vectors)} rows")
        return labels

    @classmethod
    def input_columns(cls, available: Iterable[str]) -> tuple[str, ...]:
        """The text columns to feed, in order: the required ones, then optional ones present."""
        present = set(available)
        return cls.text_columns + tuple(c for c in cls.optional_text_columns if c in present)

    @classmethod
    def required_columns(cls) -> tuple[str, ...]:
        label = (cls.label_column,) if cls.label_column else ()
        return cls.text_columns + label

    @classmethod
    def make_batch(
        cls, data: Mapping[str, Sequence], rows: Sequence[int]
    ) -> tuple[list[list[str]], torch.Tensor | None]:
        """Cut rows out of named columns into the `(columns, labels)` that `forward` takes."""
        columns = [[data[name][row] for row in rows] for name in cls.input_columns(data)]
        if cls.label_column is None:
            return columns, None
        labels = torch.tensor([data[cls.label_column][row] for row in rows], dtype=cls.label_dtype)
        return columns, labels

    def _check_columns(self, columns: TextColumns) -> None:
        least = len(self.text_columns)
        most = least + len(self.optional_text_columns)
        if not least <= len(columns) <= most:
            names = ", ".join(self.text_columns + self.optional_text_columns)
            raise ValueError(f"{type(self).__name__} takes {least}-{most} text columns ({names})")
        if len({len(texts) for texts in columns}) > 1:
            raise ValueError("all text columns of a batch must have the same number of rows")
