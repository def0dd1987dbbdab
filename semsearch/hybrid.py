"""Hybrid search: one ranking made of a dense (vector) ranking and a lexical (BM25) one.

Reciprocal rank fusion (`rrf`) scores a row sum(1 / (rrf_k + rank)) over the lists that hold
it: it needs no scores, so BM25's unbounded ones and cosine's [-1, 1] never have to agree.
The convex combination (`convex`) normalises each list's scores to [0, 1] (min-max over the
list) and adds alpha x dense + (1 - alpha) x lexical; a row missing from a list gets 0 there.
Its alpha depends on the data: `semsearch.evaluation.hybrid.tune_alpha` picks it on a dev
split of labelled queries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semsearch.errors import SemsearchError
from semsearch.options import (
    DEFAULT_ALPHA,
    DEFAULT_RRF_K,
    FUSION_METHODS,
    HYBRID_DEPTH,
    SEARCH_MODES,
    FusionMethod,
)

Ranking = tuple[np.ndarray, np.ndarray]  # scores and rows [queries, k], rows -1 where empty


@dataclass(frozen=True)
class Fusion:
    """How `hybrid` fuses: the method, its constant or weight, and the candidates per side."""

    method: FusionMethod = "rrf"
    rrf_k: int = DEFAULT_RRF_K
    alpha: float = DEFAULT_ALPHA  # the dense side's weight (convex only)
    depth: int = HYBRID_DEPTH

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise SemsearchError(
                f"--fusion {self.method!r} is not known: use {' or '.join(FUSION_METHODS)}"
            )
        if not 0 <= self.alpha <= 1:
            raise SemsearchError(f"--alpha must be between 0 and 1, not {self.alpha}")
        if self.rrf_k < 0 or self.depth < 1:
            raise SemsearchError("the RRF constant must be >= 0 and the fusion depth >= 1")


def check_mode(mode: str) -> str:
    """`mode` if it is one of dense, lexical, hybrid; a one-line error otherwise."""
    if mode not in SEARCH_MODES:
        raise SemsearchError(f"--mode {mode!r} is not known: use {', '.join(SEARCH_MODES)}")
    return mode


def fuse(
    dense: Ranking, lexical: Ranking, k: int, fusion: Fusion, dense_higher_is_better: bool = True
) -> Ranking:
    """The best `k` rows of each query by `fusion` of its two rankings, -1 / NaN padded;
    ties keep the dense ranking's order, then the lexical one's."""
    queries = len(dense[1])
    scores = np.full((queries, k), np.nan, np.float32)
    rows = np.full((queries, k), -1, np.int64)
    for line in range(queries):
        sides = [(dense[0][line], dense[1][line], dense_higher_is_better),
                 (lexical[0][line], lexical[1][line], True)]  # fmt: skip
        weights = (1.0, 1.0) if fusion.method == "rrf" else (fusion.alpha, 1 - fusion.alpha)
        found, parts = [], []
        for (side_scores, side_rows, higher), weight in zip(sides, weights):
            kept = side_rows >= 0
            found.append(side_rows[kept])
            parts.append(weight * _contribution(side_scores[kept], higher, fusion))
        candidates = np.concatenate(found)
        unique, first, inverse = np.unique(candidates, return_index=True, return_inverse=True)
        total = np.bincount(inverse, weights=np.concatenate(parts), minlength=len(unique))
        order = np.lexsort((first, -total))[:k]  # best first; ties by first appearance
        scores[line, : len(order)], rows[line, : len(order)] = total[order], unique[order]
    return scores, rows


def _contribution(scores: np.ndarray, higher_is_better: bool, fusion: Fusion) -> np.ndarray:
    """What each entry of one ranked list adds to its row's fused score."""
    if fusion.method == "rrf":
        return 1.0 / (fusion.rrf_k + np.arange(1, len(scores) + 1))
    if len(scores) == 0:
        return np.zeros(0)
    values = np.asarray(scores, np.float64) * (1 if higher_is_better else -1)
    low, high = values.min(), values.max()
    return (values - low) / (high - low) if high > low else np.ones_like(values)
