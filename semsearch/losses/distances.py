"""Distances and similarities between sentence vectors, shared by the losses."""

from __future__ import annotations

from typing import Literal, cast, get_args

import torch
from torch.nn import functional

Distance = Literal["euclidean", "cosine"]
DISTANCES: tuple[str, ...] = get_args(Distance)


def check_distance(kind: str) -> Distance:
    """Fail at construction, not at the first batch, on an unknown distance."""
    if kind not in DISTANCES:
        raise ValueError(f"distance must be one of {', '.join(DISTANCES)}, not {kind!r}")
    return cast(Distance, kind)


def pair_distance(u: torch.Tensor, v: torch.Tensor, kind: Distance) -> torch.Tensor:
    """Row-wise distance between two [batch, dim] tensors: a [batch] tensor."""
    if check_distance(kind) == "cosine":
        return 1 - functional.cosine_similarity(u, v)
    # pairwise_distance adds a small epsilon, so identical rows keep a finite gradient.
    return functional.pairwise_distance(u, v)


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row of `a` with every row of `b`: [len(a), len(b)]."""
    return functional.normalize(a, dim=1) @ functional.normalize(b, dim=1).T
