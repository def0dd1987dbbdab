"""Re-ranking: the bi-encoder retrieves candidates, a cross-encoder re-orders them.

The bi-encoder searches the whole collection at the cost of one query encoding; the
cross-encoder then reads the query together with each of the `top` candidates (one forward
pass per pair, far too slow for a whole collection) and the best `k` by its score are kept.

    reranker = Reranker(CrossEncoder.load("models/cross-stsb"), top=100)
    results = reranker.search(Searcher.open("docs"), ["how do I zip a folder"], k=10)

`rerank_many` does the same to several document-id rankings of the same queries (dense,
lexical, hybrid), for `ir_metrics`, scoring each pair once;
`rerank_verdicts` says in words whether re-ranking raised or lowered each one's figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from semsearch.errors import SemsearchError
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.options import DEFAULT_RERANK_TOP
from semsearch.search.searcher import Hit, Searcher

# The name the re-ranked score goes by in tables and JSON (the bi-encoder's is kept apart).
RERANK_SCORE = "rerank_score"
# A change of nDCG@10 smaller than this is reported as none (40 queries move it by 0.0005
# when one document swaps places with its neighbour).
RERANK_TOLERANCE = 0.0005


@dataclass(frozen=True)
class Reranker:
    """Re-orders each query's first `top` candidates by a one-score cross-encoder."""

    cross_encoder: CrossEncoder
    top: int = DEFAULT_RERANK_TOP
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.top < 1:
            raise SemsearchError(f"--rerank-top must be at least 1, not {self.top}")
        if self.cross_encoder.num_labels != 1:
            raise SemsearchError(
                f"cross-encoder {self.cross_encoder.name!r} has {self.cross_encoder.num_labels} "
                "class outputs: re-ranking needs a one-score (bce) cross-encoder"
            )

    def search(
        self, searcher: Searcher, queries: list[str], k: int = 10, **search_params: int | None
    ) -> list[list[Hit]]:
        """The best `k` per query among the index's first max(top, k) hits, by cross-encoder."""
        candidates = searcher.search(queries, k=max(self.top, k), **search_params)
        return self.rerank_hits(queries, candidates, k)

    def rerank_hits(
        self, queries: Sequence[str], results: Sequence[Sequence[Hit]], k: int
    ) -> list[list[Hit]]:
        """Each query's first max(top, k) hits re-ordered by cross-encoder score, cut to `k`.

        The score becomes the cross-encoder's; the retrieval's rank and score stay in the
        metadata (`retrieval_rank`, `retrieval_score`). Ties keep the retrieval order.
        """
        heads = [list(hits[: max(self.top, k)]) for hits in results]
        if any(hit.text is None for hits in heads for hit in hits):
            raise SemsearchError(
                "--rerank scores the hits' texts, and this index has no text column (your own "
                "vectors): query without --rerank"
            )
        scores = self.scores(queries, [[hit.text for hit in hits] for hits in heads])
        reranked = []
        for query, hits, hit_scores in zip(queries, heads, scores):
            order = np.argsort(-hit_scores, kind="stable")[:k]
            reranked.append(
                [
                    _rescored(hits[i], query, rank, float(hit_scores[i]))
                    for rank, i in enumerate(order, start=1)
                ]
            )
        return reranked

    def rerank_many(
        self,
        rankings: Mapping[str, Mapping[str, Sequence[str]]],
        queries: Mapping[str, str],
        documents: Mapping[str, str],
    ) -> dict[str, dict[str, list[str]]]:
        """Several document-id rankings of the same queries (e.g. dense, lexical, hybrid),
        each one's first `top` ids re-ordered by the cross-encoder (query text from `queries`,
        document text from `documents`) and the rest kept in place after them; a (query,
        document) pair they share is scored once."""
        heads: dict[str, dict[str, None]] = {}
        for ranking in rankings.values():
            for query, ids in ranking.items():
                heads.setdefault(query, {}).update(dict.fromkeys(ids[: self.top]))
        query_ids = list(heads)
        texts = [[documents[document] for document in heads[query]] for query in query_ids]
        scores = self.scores([queries[query] for query in query_ids], texts)
        score_of = {
            query: dict(zip(heads[query], values)) for query, values in zip(query_ids, scores)
        }
        return {
            name: {
                query: _reordered(list(ids), score_of[query], self.top)
                for query, ids in ranking.items()
            }
            for name, ranking in rankings.items()
        }

    def scores(
        self, queries: Sequence[str], candidates: Sequence[Sequence[str]]
    ) -> list[np.ndarray]:
        """The cross-encoder's score of each query with each of its candidate texts, all
        pairs scored in one length-sorted pass."""
        pairs = [(query, text) for query, texts in zip(queries, candidates) for text in texts]
        flat = (
            self.cross_encoder.predict(pairs, batch_size=self.batch_size)
            if pairs
            else np.empty(0, dtype=np.float32)
        )
        return np.split(flat, np.cumsum([len(texts) for texts in candidates])[:-1])


def _reordered(ids: list[str], score_of: Mapping[str, float], top: int) -> list[str]:
    """The first `top` ids by descending score (ties keep their order), then the rest."""
    head = ids[:top]
    order = np.argsort(-np.array([score_of[i] for i in head], dtype=np.float64), kind="stable")
    return [head[i] for i in order] + ids[top:]


def _rescored(hit: Hit, query: str, rank: int, score: float) -> Hit:
    metadata = {**hit.metadata, "retrieval_rank": hit.rank, "retrieval_score": hit.score}
    return Hit(query, rank, score, hit.id, hit.text, metadata)


def rerank_verdicts(modes: dict[str, dict[str, float]], metric: str = "ndcg@10") -> list[str]:
    """One plain sentence per re-ranked mode: did the cross-encoder raise or lower `metric`?"""
    verdicts = []
    for mode, after in modes.items():
        if not mode.endswith(" + rerank"):
            continue
        first = mode.removesuffix(" + rerank")
        before, now = modes[first][metric], after[metric]
        change = f"{metric} {before:.4f} -> {now:.4f} ({now - before:+.4f})"
        if now < before - RERANK_TOLERANCE:
            verdicts.append(
                f"re-ranking LOWERS {first} {change}: this cross-encoder hurts on "
                "this data; search without --rerank"
            )
        elif now > before + RERANK_TOLERANCE:
            verdicts.append(f"re-ranking raises {first} {change}")
        else:
            verdicts.append(f"re-ranking leaves {first} unchanged: {change}")
    return verdicts
