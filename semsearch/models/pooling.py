"""Pooling: token vectors -> one sentence vector, ignoring padding."""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import nn

PoolingMode = Literal["mean", "max", "cls"]
POOLING_MODES: tuple[str, ...] = get_args(PoolingMode)


class Pooling(nn.Module):
    """Mask-aware pooling, so that padded positions never change a sentence's vector."""

    def __init__(self, mode: PoolingMode = "mean") -> None:
        super().__init__()
        if mode not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {', '.join(POOLING_MODES)}, not {mode!r}")
        self.mode: PoolingMode = mode

    def forward(self, token_embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Pool `token_embeddings` [batch, tokens, dim] over the positions where the mask is 1."""
        if self.mode == "cls":
            return token_embeddings[:, 0]
        mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
        if self.mode == "max":
            lowest = torch.finfo(token_embeddings.dtype).min
            return token_embeddings.masked_fill(mask == 0, lowest).max(dim=1).values
        summed = (token_embeddings * mask).sum(dim=1)
        counts = mask.sum(dim=1).clamp(min=1e-9)
        return summed / counts
