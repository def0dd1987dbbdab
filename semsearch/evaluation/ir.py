"""`ir`: retrieval quality on a BEIR-format set, by exact search over the whole corpus.

Graded judgements count as in trec_eval (and so in BEIR's tables): nDCG uses the grade as
gain; MRR, recall and MAP count any grade above 0 as relevant, and MAP@k divides by the
number of relevant documents. Queries without a relevant document are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from semsearch.ann.exact import ExactSearch
from semsearch.evaluation.base import Evaluator, TextEncoder
from semsearch.evaluation.beir import RetrievalData
from semsearch.evaluation.similarity import normalize_rows
from semsearch.models.prompts import encode_documents, encode_queries

NDCG_AT, MRR_AT, MAP_AT = 10, 10, 100
RECALL_AT = (1, 10, 100)
DEPTH = max(NDCG_AT, MRR_AT, MAP_AT, *RECALL_AT)


class InformationRetrievalEvaluator(Evaluator):
    """nDCG@10 (the primary, as BEIR), MRR@10, recall@1/10/100 and MAP@100."""

    primary_metric = f"ndcg@{NDCG_AT}"

    def __init__(self, data: RetrievalData, name: str = "ir", batch_size: int = 64) -> None:
        super().__init__(name, batch_size)
        self.data = data

    def evaluate(self, encoder: TextEncoder) -> dict[str, float]:
        judged, _, top = dense_search(encoder, self.data, DEPTH, self.batch_size)
        document_ids = list(self.data.corpus)
        rankings = {query: [document_ids[i] for i in row] for query, row in zip(judged, top)}
        return ir_metrics(rankings, self.data.qrels)


def dense_search(
    encoder: TextEncoder, data: RetrievalData, depth: int, batch_size: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The judged queries, and the scores and corpus rows of each one's `depth` nearest
    documents by exact cosine search."""
    judged = [query for query in data.qrels if query in data.queries]
    corpus = list(data.corpus.values())
    documents = normalize_rows(encode_documents(encoder, corpus, batch_size=batch_size))
    texts = [data.queries[query] for query in judged]
    queries = normalize_rows(encode_queries(encoder, texts, batch_size=batch_size))
    scores, rows = ExactSearch(np.asarray(documents, np.float32), "dot").search(
        np.asarray(queries, np.float32), depth
    )
    return judged, scores, rows


def exact_search(queries: np.ndarray, documents: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the k highest inner products per query, best first (ties: lower
    index), by the package's exact k-NN."""
    return ExactSearch(np.asarray(documents, np.float32), "dot").search(
        np.asarray(queries, np.float32), k
    )[1]


def ir_metrics(
    rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """Mean metrics over the judged queries with at least one relevant document.

    `rankings` maps a query id to document ids, best first (a query without a ranking
    scores 0); it may come from this module's exact search or from an index.
    """
    per_query = [
        _query_metrics(list(rankings.get(query, ())), grades)
        for query, grades in qrels.items()
        if any(grade > 0 for grade in grades.values())
    ]
    if not per_query:
        raise ValueError("no query has a relevant document: nothing to evaluate")
    metrics = {name: float(np.mean([row[name] for row in per_query])) for name in per_query[0]}
    metrics["queries"] = float(len(per_query))
    return metrics


def _query_metrics(ranking: list[str], grades: Mapping[str, int]) -> dict[str, float]:
    relevant = {document for document, grade in grades.items() if grade > 0}
    hits = [document in relevant for document in ranking]
    metrics = {f"ndcg@{NDCG_AT}": _ndcg(ranking[:NDCG_AT], grades)}
    first_hit = next((rank for rank, hit in enumerate(hits[:MRR_AT], start=1) if hit), None)
    metrics[f"mrr@{MRR_AT}"] = 1 / first_hit if first_hit else 0.0
    for k in RECALL_AT:
        metrics[f"recall@{k}"] = sum(hits[:k]) / len(relevant)
    found = np.array(hits[:MAP_AT], dtype=np.float64)
    precision_at_hits = found * np.cumsum(found) / np.arange(1, len(found) + 1)
    metrics[f"map@{MAP_AT}"] = float(precision_at_hits.sum()) / len(relevant)
    return metrics


def _ndcg(top: list[str], grades: Mapping[str, int]) -> float:
    discounts = 1 / np.log2(np.arange(2, NDCG_AT + 2))
    gains = np.array([max(grades.get(document, 0), 0) for document in top], dtype=np.float64)
    ideal = np.sort([grade for grade in grades.values() if grade > 0])[::-1][:NDCG_AT]
    ideal_dcg = float(np.sum(ideal * discounts[: len(ideal)]))
    return float(np.sum(gains * discounts[: len(gains)])) / ideal_dcg
