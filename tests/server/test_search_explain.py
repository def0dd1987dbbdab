"""`"explain": true` on /search: the plan and each stage's time in the answer, in every mode."""

from __future__ import annotations

import pytest


def _stages(explain: dict) -> dict:
    time = explain["time"]
    total = sum(time["phases"].values()) - time["overlapped_s"] + time["other_s"]
    assert total == pytest.approx(time["wall_s"], abs=0.002)
    return time["phases"]


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_an_explained_search_answers_with_its_plan_and_stages(client, sentences, mode) -> None:
    body = {"q": sentences[3], "k": 3, "mode": mode, "where": "topic = 'pets'", "explain": True}
    got = client.post("/search", json=body).json()
    explain = got["explain"]
    assert explain["mode"] == mode and explain["k"] == 3 and explain["index"]["name"] == "docs"
    assert explain["filter"]["where"] == "topic = 'pets'" and explain["filter"]["matches"] == 2
    stages = _stages(explain)
    assert ("encode" in stages) == (mode != "lexical")  # the batch the texts were encoded in
    assert ("lexical" in stages) == (mode != "dense") and "metadata" in stages
    assert "explain" not in client.post("/search", json={**body, "explain": False}).json()


def test_explain_works_for_vectors_and_in_the_url(client, sentences) -> None:
    dimension = client.registry.get("docs").searcher.manifest.model.dimension
    by_vector = client.post("/search", json={"vector": [0.1] * dimension, "explain": True}).json()
    assert by_vector["explain"]["queries"] == 1
    assert "encode" not in _stages(by_vector["explain"])
    in_url = client.get("/search", params={"q": sentences[0], "k": 2, "explain": "true"}).json()
    assert in_url["explain"]["k"] == 2 and "vector search" in _stages(in_url["explain"])
