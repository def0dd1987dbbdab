"""Pooling: token vectors -> one sentence vector, ignoring padding."""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import nn

PoolingMode = Literal["mean", "max", "cls", "attention"]
POOLING_MODES: tuple[str, ...] = get_args(PoolingMode)


class Pooling(nn.Module):
    """Mask-aware pooling, so that padded positions never change a sentence's vector.

    `attention` learns one weight per token (a linear scorer over the hidden state,
    softmax over the real tokens); it needs the hidden size as `dimension`. Its scorer
    starts at zero, so an untrained attention pooling is exactly mean pooling and
    fine-tuning starts from the vectors a mean-pooled model already gives.
    """

    def __init__(self, mode: PoolingMode = "mean", dimension: int | None = None) -> None:
        super().__init__()
        if mode not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {', '.join(POOLING_MODES)}, not {mode!r}")
        self.mode: PoolingMode = mode
        self.scorer: nn.Linear | None = None
        if mode == "attention":
            if dimension is None:
                raise ValueError("attention pooling needs the hidden size: Pooling('attention', d)")
            self.scorer = nn.Linear(dimension, 1)
            nn.init.zeros_(self.scorer.weight)
            nn.init.zeros_(self.scorer.bias)

    def forward(self, token_embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Pool `token_embeddings` [batch, tokens, dim] over the positions where the mask is 1."""
        if self.mode == "cls":
            return token_embeddings[:, 0]
        if self.scorer is not None:
            return self._attend(token_embeddings, attention_mask)
        mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
        if self.mode == "max":
            lowest = torch.finfo(token_embeddings.dtype).min
            return token_embeddings.masked_fill(mask == 0, lowest).max(dim=1).values
        summed = (token_embeddings * mask).sum(dim=1)
        counts = mask.sum(dim=1).clamp(min=1e-9)
        return summed / counts

    def _attend(self, token_embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # Scores and softmax in float32: under bf16 autocast the weights would lose precision.
        scores = self.scorer(token_embeddings).squeeze(-1).float()
        scores = scores.masked_fill(attention_mask == 0, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=1).to(token_embeddings.dtype)
        return torch.einsum("bt,btd->bd", weights, token_embeddings)
