"""The pair features that classifier heads read: u, v, |u - v| and optionally u * v."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import torch

PairPart = Literal["u", "v", "abs_diff", "product"]
PAIR_PARTS: tuple[str, ...] = get_args(PairPart)
DEFAULT_PARTS: tuple[PairPart, ...] = ("u", "v", "abs_diff")


def check_parts(parts: Sequence[PairPart]) -> tuple[PairPart, ...]:
    unknown = [part for part in parts if part not in PAIR_PARTS]
    if unknown or not parts:
        raise ValueError(f"pair parts must be a non-empty choice of {', '.join(PAIR_PARTS)}")
    return tuple(parts)


def pair_features(u: torch.Tensor, v: torch.Tensor, parts: Sequence[PairPart]) -> torch.Tensor:
    """Concatenate the chosen parts of two [batch, dim] tensors: [batch, len(parts) * dim]."""
    return torch.cat([_part(u, v, part) for part in parts], dim=1)


def _part(u: torch.Tensor, v: torch.Tensor, part: PairPart) -> torch.Tensor:
    if part == "u":
        return u
    if part == "v":
        return v
    if part == "abs_diff":
        return (u - v).abs()
    return u * v
