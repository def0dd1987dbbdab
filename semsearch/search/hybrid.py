"""Hybrid search: one ranking made of a dense (vector) ranking and a lexical (BM25) one.

`rrf` (reciprocal rank fusion) scores a row sum(1 / (rrf_k + rank)) over the lists: it needs
no scores, so BM25's unbounded ones and cosine's never have to agree. `convex` scales each
list's scores to [0, 1] and adds alpha x dense + (1 - alpha) x lexical (a missing row gets
0); its alpha depends on the data (`semsearch.evaluation.hybrid.tune_alpha`).

The default, `adaptive`, is convex with the lexical weight set per query by BM25's
confidence: (1 - alpha) x (s1 - s10) / s1 of its first and tenth scores. Why: no fixed
weight suits both kinds of data. On DBPedia the vectors win (nDCG@10 0.511 against 0.368),
on Debian synopses BM25 does (0.709 against 0.749); adaptive scored 0.514 and 0.754, where
RRF scored 0.478 and 0.758, convex 0.5 scored 0.469 and 0.789 (benchmarks/hybrid_quality.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semsearch.errors import SemsearchError
from semsearch.options import (
    DEFAULT_ALPHA,
    DEFAULT_FUSION,
    DEFAULT_RRF_K,
    FUSION_METHODS,
    HYBRID_DEPTH,
    SEARCH_MODES,
    FusionMethod,
)

Ranking = tuple[np.ndarray, np.ndarray]  # scores and rows [queries, k], rows -1 where empty


# BM25's confidence in a query: how far its first score stands above its SPREAD_RANK-th.
SPREAD_RANK = 10


@dataclass(frozen=True)
class Fusion:
    """How `hybrid` fuses: the method, its constant or weight, and the candidates per side."""

    method: FusionMethod = DEFAULT_FUSION
    rrf_k: int = DEFAULT_RRF_K
    alpha: float = DEFAULT_ALPHA  # the dense side's weight (convex; adaptive's least)
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
        sides = [
            (dense[0][line], dense[1][line], dense_higher_is_better),
            (lexical[0][line], lexical[1][line], True),
        ]
        weights = _weights(fusion, lexical[0][line], lexical[1][line])
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


def _weights(
    fusion: Fusion, lexical_scores: np.ndarray, lexical_rows: np.ndarray
) -> tuple[float, float]:
    """The dense and lexical sides' weights for one query."""
    if fusion.method == "rrf":
        return 1.0, 1.0
    if fusion.method == "convex":
        return fusion.alpha, 1 - fusion.alpha
    lexical = (1 - fusion.alpha) * bm25_spread(lexical_scores[lexical_rows >= 0])
    return 1 - lexical, lexical


def bm25_spread(scores: np.ndarray) -> float:
    """How far BM25's first score stands above its SPREAD_RANK-th, in [0, 1] (0 without hits):
    flat top scores mean the query's words match many texts alike."""
    if len(scores) == 0 or not scores[0] > 0:
        return 0.0
    low = scores[min(SPREAD_RANK, len(scores)) - 1]
    return float(np.clip((scores[0] - low) / scores[0], 0.0, 1.0))


def describe(fusion: Fusion) -> str:
    """What a hybrid score means, in a few words (for reports and the search page)."""
    if fusion.method == "rrf":
        return (
            f"hybrid score: reciprocal rank fusion, the sum of 1/({fusion.rrf_k} + rank) over "
            "the dense and BM25 rankings; it orders one query's results only"
        )
    how = (
        f"{fusion.alpha:g} x dense + {1 - fusion.alpha:g} x BM25"
        if fusion.method == "convex"
        else f"dense and BM25, BM25 weighing up to {1 - fusion.alpha:g} where its top scores "
        "stand out and less where they are flat"
    )
    return (
        f"hybrid score: {how}, each side's scores scaled to 0-1 within the query; "
        "it orders one query's results only"
    )


def _contribution(scores: np.ndarray, higher_is_better: bool, fusion: Fusion) -> np.ndarray:
    """What each entry of one ranked list adds to its row's fused score (before its weight)."""
    if fusion.method == "rrf":
        return 1.0 / (fusion.rrf_k + np.arange(1, len(scores) + 1))
    if len(scores) == 0:
        return np.zeros(0)
    values = np.asarray(scores, np.float64) * (1 if higher_is_better else -1)
    low, high = values.min(), values.max()
    return (values - low) / (high - low) if high > low else np.ones_like(values)
