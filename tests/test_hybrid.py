"""Fusing a dense and a lexical ranking: reciprocal rank fusion and the convex combination."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.errors import SemsearchError
from semsearch.hybrid import Fusion, check_mode, fuse


def _ranking(rows: list[int], scores: list[float], width: int = 4):
    padded_rows = np.full((1, width), -1, np.int64)
    padded_scores = np.full((1, width), np.nan, np.float32)
    padded_rows[0, : len(rows)], padded_scores[0, : len(scores)] = rows, scores
    return padded_scores, padded_rows


DENSE = _ranking([7, 3, 5], [0.9, 0.8, 0.1])
LEXICAL = _ranking([3, 9], [12.0, 2.0])


def test_rrf_adds_one_over_k_plus_rank_and_ties_keep_the_dense_order() -> None:
    scores, rows = fuse(DENSE, LEXICAL, 4, Fusion("rrf", rrf_k=60))
    assert rows[0].tolist() == [3, 7, 9, 5]  # 3 is in both lists; 7 and 9 tie at rank 1 and 2
    assert scores[0, 0] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[0, 2] == pytest.approx(1 / 62)


def test_convex_weights_min_max_normalised_scores() -> None:
    only_dense = fuse(DENSE, LEXICAL, 4, Fusion("convex", alpha=1.0))[1][0].tolist()
    assert only_dense[:3] == [7, 3, 5]
    scores, rows = fuse(DENSE, LEXICAL, 2, Fusion("convex", alpha=0.5))
    assert rows[0].tolist() == [3, 7]
    assert scores[0].tolist() == pytest.approx([0.5 * 0.875 + 0.5, 0.5])
    distances = _ranking([7, 3, 5], [0.1, 0.2, 0.9])  # lower is closer: 7 is the best
    assert fuse(distances, LEXICAL, 1, Fusion("convex", alpha=1.0), False)[1][0].tolist() == [7]


def test_an_empty_side_and_bad_settings() -> None:
    empty = _ranking([], [])
    assert fuse(DENSE, empty, 4, Fusion())[1][0].tolist() == [7, 3, 5, -1]
    with pytest.raises(
        SemsearchError, match="--mode 'sparse' is not known: use dense, lexical, hybrid"
    ):
        check_mode("sparse")
    with pytest.raises(SemsearchError, match="--fusion 'max' is not known"):
        Fusion("max")
    with pytest.raises(SemsearchError, match="--alpha must be between 0 and 1"):
        Fusion("convex", alpha=1.5)
