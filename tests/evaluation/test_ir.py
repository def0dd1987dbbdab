"""ir: ranking metrics worked by hand, exact search, and the evaluator end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semsearch.evaluation import (
    InformationRetrievalEvaluator,
    RetrievalData,
    exact_search,
    ir_metrics,
)


def test_a_perfect_ranking_scores_one_everywhere() -> None:
    qrels = {"q": {"d1": 2, "d2": 1}}
    metrics = ir_metrics({"q": ["d1", "d2", "d3"]}, qrels)
    for name in ("ndcg@10", "mrr@10", "recall@10", "recall@100", "map@100"):
        assert metrics[name] == pytest.approx(1.0)
    assert metrics["recall@1"] == pytest.approx(0.5)  # two relevant, one slot
    assert metrics["queries"] == 1


def test_one_relevant_document_at_rank_two() -> None:
    metrics = ir_metrics({"q": ["x", "d1", "y"]}, {"q": {"d1": 1, "x": 0}})
    assert metrics["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert metrics["mrr@10"] == pytest.approx(0.5)
    assert metrics["recall@1"] == 0.0 and metrics["recall@10"] == 1.0
    assert metrics["map@100"] == pytest.approx(0.5)


def test_graded_gains_and_missing_relevant_documents() -> None:
    # Grades 1 and 2; the ranking finds only the grade-1 document, at rank 1.
    metrics = ir_metrics({"q": ["d1", "x"]}, {"q": {"d1": 1, "d2": 2}})
    ideal = 2 + 1 / math.log2(3)
    assert metrics["ndcg@10"] == pytest.approx(1 / ideal)
    assert metrics["map@100"] == pytest.approx(0.5)  # precision 1 at the hit, over 2 relevant
    assert metrics["recall@10"] == pytest.approx(0.5)


def test_queries_without_relevant_documents_are_left_out_and_others_averaged() -> None:
    qrels = {"good": {"d1": 1}, "bad": {"d2": 1}, "unjudged": {"d3": 0}}
    metrics = ir_metrics({"good": ["d1"], "bad": ["d1"]}, qrels)
    assert metrics["queries"] == 2 and metrics["mrr@10"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no query has a relevant document"):
        ir_metrics({}, {"q": {"d": 0}})


def test_exact_search_orders_by_score_then_by_row() -> None:
    documents = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.5, 0.5]])
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert exact_search(queries, documents, 3).tolist() == [[1, 2, 3], [0, 3, 1]]
    assert exact_search(queries, documents, 10).shape == (2, 4)


def test_evaluator_finds_what_the_vectors_say(table_encoder) -> None:
    corpus = {"d1": "cats", "d2": "dogs", "d3": "stocks"}
    queries = {"q1": "kitten?", "q2": "markets?", "q3": "unjudged"}
    vectors = {
        "cats": [1, 0, 0],
        "dogs": [0, 1, 0],
        "stocks": [0, 0, 1],
        "kitten?": [0.9, 0.1, 0],
        "markets?": [0, 0.5, 0.4],
        "unjudged": [1, 1, 1],
    }
    data = RetrievalData(corpus, queries, {"q1": {"d1": 1}, "q2": {"d3": 1}})
    encoder = table_encoder(vectors)
    metrics = InformationRetrievalEvaluator(data)(encoder)
    # q1 finds d1 first; q2's vector leans to dogs, so stocks comes second.
    assert metrics["mrr@10"] == pytest.approx((1 + 0.5) / 2)
    assert metrics["recall@1"] == pytest.approx(0.5)
    assert ["unjudged"] not in encoder.calls and len(encoder.calls) == 2
