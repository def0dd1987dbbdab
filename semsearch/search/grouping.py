"""One hit per document on a chunked index: each document ranked by its best chunk.

Why the best chunk and not a mean of chunk vectors: a mean blurs a document's passages into
one vector that matches none of them well (the advice of sentence-transformers' maintainers,
and what Milvus' grouping search and Vespa's multi-vector ranking do). The chunks are searched
as rows; when the best `depth` rows hold fewer than k documents, the search runs again deeper,
so k distinct documents come back whenever the index holds that many.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# Chunk rows searched per document asked for, at first; four times more on each retry.
FIRST_DEPTH = 4
DEEPER = 4

Ranking = tuple[np.ndarray, np.ndarray]  # scores and row numbers, [queries, depth], best first


def best_chunk_per_document(
    rank: Callable[[int], Ranking],
    documents: Callable[[np.ndarray], list],
    k: int,
    live_rows: int,
) -> Ranking:
    """The rows of each query's `k` best documents, each its best chunk's (-1 where fewer
    exist). `rank(depth)` gives every query's `depth` best chunk rows; `documents(rows)` the
    document id of each row."""
    depth = max(1, min(k * FIRST_DEPTH, live_rows))
    while True:
        scores, rows = rank(depth)
        best_scores = np.zeros((len(rows), k), dtype=scores.dtype)
        best_rows = np.full((len(rows), k), -1, dtype=np.int64)
        short = False
        for query, (query_scores, query_rows) in enumerate(zip(scores, rows)):
            found = query_rows >= 0
            kept = _first_of_each(documents(query_rows[found]), k)
            best_scores[query, : len(kept)] = query_scores[found][kept]
            best_rows[query, : len(kept)] = query_rows[found][kept]
            # A full ranking may hide more documents further down; a short one holds them all.
            short |= len(kept) < k and bool(found.all())
        if not short or depth >= live_rows:
            return best_scores, best_rows
        depth = min(depth * DEEPER, live_rows)


def _first_of_each(documents: list, k: int) -> list[int]:
    """Positions of each document's first (best) row, in order, at most `k` of them."""
    seen: set = set()
    kept: list[int] = []
    for position, document in enumerate(documents):
        if document not in seen:
            seen.add(document)
            kept.append(position)
            if len(kept) == k:
                break
    return kept
