"""A smaller k never gives a worse answer: every k is searched at least as deep as tuning
measured (recall@10), so `-k 1`'s hit is `-k 10`'s first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semsearch.search.searcher import Searcher
from tests.io.test_own_vectors import build, vector_corpus

ROWS, DIMENSION = 400, 30


@pytest.mark.parametrize("index_type", ["flat", "ivf", "ivfsq", "hnsw", "ivfpq", "disk"])
def test_the_first_hit_of_k_1_is_the_first_of_k_10(tmp_path: Path, index_type: str) -> None:
    # Before: a `disk` index re-scored k x oversample candidates, 4 for -k 1 against 40 for
    # -k 10, and -k 1 missed the true top-1 that -k 10 found.
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(ROWS, DIMENSION)).astype(np.float32)
    corpus = vector_corpus(tmp_path / "c.parquet", vectors)
    folder = build(corpus, tmp_path / "idx", index=index_type, target_recall=None, lexical=None)
    searcher = Searcher(folder)
    queries = rng.normal(size=(200, DIMENSION)).astype(np.float32)
    one = searcher.search_vectors(queries, k=1)
    ten = searcher.search_vectors(queries, k=10)
    first_of_one = [hits[0].id for hits in one]
    first_of_ten = [hits[0].id for hits in ten]
    assert first_of_one == first_of_ten
