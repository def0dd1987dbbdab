"""Fusing a dense and a lexical ranking: reciprocal rank fusion and the convex combination."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.errors import SemsearchError
from semsearch.search.hybrid import Fusion, bm25_spread, check_mode, describe, fuse


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


def _lexical(scores: list[float]):
    return _ranking(list(range(100, 100 + len(scores))), scores, width=max(len(scores), 4))


def test_bm25_spread_measures_how_far_the_first_score_stands_out() -> None:
    assert bm25_spread(np.array([10.0] * 12)) == 0.0  # flat: common words only
    assert bm25_spread(np.array([10.0] + [2.0] * 11)) == pytest.approx(0.8)
    assert bm25_spread(np.array([10.0, 5.0])) == pytest.approx(0.5)  # fewer than 10 hits
    assert bm25_spread(np.array([])) == 0.0


def test_adaptive_follows_the_vectors_where_bm25_is_flat_and_weighs_it_where_it_stands_out() -> (
    None
):
    dense = _ranking([1, 2, 3, 4], [0.9, 0.8, 0.7, 0.6])
    # BM25 puts row 2 first, but its top scores are all alike: the dense order stands.
    flat = _ranking([2, 4, 3, 1], [5.0, 5.0, 5.0, 5.0])
    assert fuse(dense, flat, 4, Fusion())[1][0].tolist() == [1, 2, 3, 4]
    # The same order with row 2 standing far out: BM25 weighs 0.5 x 0.9 and lifts it.
    peaked = _ranking([2, 4, 3, 1], [10.0, 1.0, 1.0, 1.0])
    scores, rows = fuse(dense, peaked, 4, Fusion())
    assert rows[0].tolist() == [2, 1, 3, 4] and Fusion().method == "adaptive"
    assert scores[0, 0] == pytest.approx(0.55 * 2 / 3 + 0.45 * 1.0)  # dense 0.8 of 0.6..0.9
    assert describe(Fusion()).startswith("hybrid score: dense and BM25")
    assert "reciprocal rank" in describe(Fusion("rrf"))
