"""The pair features that classifier heads read: u, v, |u - v| and optionally u * v."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import torch

PairPart = Literal["u", "v", "abs_diff", "product"]
PAIR_PARTS: tuple[str, ...] = get_args(PairPart)
DEFAULT_PARTS: tuple[PairPart, ...] = ("u", "v", "abs_diff")


# The way papers write the parts (SBERT's Table 6), accepted in a comma-separated string.
PART_SYMBOLS = {"|u-v|": "abs_diff", "u*v": "product"}


def check_parts(parts: Sequence[PairPart] | str) -> tuple[PairPart, ...]:
    """The parts as a tuple; a string such as `u,v,|u-v|,u*v` is read as a list."""
    if isinstance(parts, str):
        parts = [PART_SYMBOLS.get(p.strip(), p.strip()) for p in parts.split(",")]  # type: ignore[misc]
    unknown = [part for part in parts if part not in PAIR_PARTS]
    if unknown or not parts:
        raise ValueError(
            f"unknown pair features {', '.join(map(str, unknown)) or '(none)'}: choose from "
            f"{', '.join(PAIR_PARTS)} (or write them u,v,|u-v|,u*v)"
        )
    return tuple(parts)  # type: ignore[arg-type]


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
