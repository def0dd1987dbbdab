"""Re-ranking: candidates re-ordered by the cross-encoder's score, cut to k, ranks renumbered."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_cross import make_tiny_cross_encoder

from semsearch.errors import SemsearchError
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.rerank import Reranker
from semsearch.search.searcher import Hit


@pytest.fixture(scope="module")
def cross(tiny_model_dir, tmp_path_factory) -> CrossEncoder:
    folder = make_tiny_cross_encoder(tiny_model_dir, tmp_path_factory.mktemp("cross"))
    return CrossEncoder.load(str(folder), device="cpu")


def _hits(query: str, texts: list[str]) -> list[Hit]:
    return [
        Hit(query, rank, 1 - rank / 100, f"d{rank}", text, {"topic": "x"})
        for rank, text in enumerate(texts, start=1)
    ]


def test_hits_are_reordered_by_cross_encoder_score_and_cut_to_k(cross, sentences) -> None:
    query = "Someone plays music."
    candidates = _hits(query, sentences[:8])
    expected = cross.predict([(query, text) for text in sentences[:8]])
    [reranked] = Reranker(cross, top=8).rerank_hits([query], [candidates], k=3)
    order = np.argsort(-expected, kind="stable")[:3]
    assert [hit.text for hit in reranked] == [sentences[i] for i in order]
    assert [hit.rank for hit in reranked] == [1, 2, 3]
    np.testing.assert_allclose([hit.score for hit in reranked], expected[order], atol=1e-6)
    first = reranked[0]
    assert first.metadata["retrieval_rank"] == order[0] + 1 and first.metadata["topic"] == "x"
    assert first.metadata["retrieval_score"] == candidates[order[0]].score


def test_only_the_first_top_candidates_are_re_ranked(cross, sentences) -> None:
    queries = ["cats", "money"]
    results = [_hits(query, sentences) for query in queries]
    reranked = Reranker(cross, top=4).rerank_hits(queries, results, k=4)
    for hits, original in zip(reranked, results):
        assert {hit.text for hit in hits} == {hit.text for hit in original[:4]}
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)


def test_search_asks_the_index_for_top_candidates(cross, sentences) -> None:
    class StubSearcher:
        def search(self, queries, k, **params):
            self.asked = (k, params)
            return [_hits(query, sentences[:k]) for query in queries]

    searcher = StubSearcher()
    results = Reranker(cross, top=6).search(searcher, ["a query"], k=2, nprobe=4)  # type: ignore[arg-type]
    assert searcher.asked == (6, {"nprobe": 4}) and len(results[0]) == 2
    Reranker(cross, top=2).search(searcher, ["a query"], k=5)  # type: ignore[arg-type]
    assert searcher.asked[0] == 5  # never fewer candidates than results


def test_rankings_keep_the_ids_past_top_in_place(cross) -> None:
    documents = {f"d{i}": f"document number {i} about topic {i % 3}" for i in range(10)}
    rankings = {"q1": [f"d{i}" for i in range(10)]}
    reranked = Reranker(cross, top=5).rerank_many({"": rankings}, {"q1": "topic 1"}, documents)[""]
    assert sorted(reranked["q1"][:5]) == [f"d{i}" for i in range(5)]
    assert reranked["q1"][5:] == [f"d{i}" for i in range(5, 10)]
    scores = cross.predict([("topic 1", documents[d]) for d in reranked["q1"][:5]])
    assert list(scores) == sorted(scores, reverse=True)


def test_several_rankings_are_re_ranked_with_each_pair_scored_once(cross, monkeypatch) -> None:
    documents = {f"d{i}": f"document number {i} about topic {i % 3}" for i in range(8)}
    queries = {"q1": "topic 1", "q2": "topic 2"}
    rankings = {
        "dense": {q: [f"d{i}" for i in range(8)] for q in queries},
        "lexical": {q: [f"d{i}" for i in reversed(range(8))] for q in queries},
    }
    reranker = Reranker(cross, top=4)
    scored = []
    original = cross.predict
    monkeypatch.setattr(
        cross, "predict", lambda pairs, **kw: scored.extend(pairs) or original(pairs, **kw)
    )
    both = reranker.rerank_many(rankings, queries, documents)
    assert len(scored) == len(set(scored)) == 2 * 8  # heads d0-d3 and d7-d4: 8 per query
    monkeypatch.setattr(cross, "predict", original)
    for name, ranking in rankings.items():
        assert both[name] == reranker.rerank_many({name: ranking}, queries, documents)[name]


def test_bad_reranker_options_are_one_line_errors(cross, tiny_model_dir) -> None:
    with pytest.raises(SemsearchError, match="--rerank-top must be at least 1"):
        Reranker(cross, top=0)
    classes = CrossEncoder.from_encoder(str(tiny_model_dir), 3, device="cpu")
    with pytest.raises(SemsearchError, match="needs a one-score"):
        Reranker(classes)
