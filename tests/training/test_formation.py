"""Forming positives, triplets and binary pairs from scored pairs or positive pairs."""

from __future__ import annotations

import pytest

from semsearch.errors import SemsearchError
from semsearch.training.formation import form_examples

SCORED = {
    "sentence1": ["a", "b", "c", "d"],
    "sentence2": ["a2", "b2", "c2", "d2"],
    "score": [0.9, 0.8, 0.5, 0.1],
}


def test_positives_keep_the_pairs_at_or_above_the_threshold() -> None:
    formed = form_examples(SCORED, "positives", 0.8, seed=0)
    assert formed == {"anchor": ["a", "b"], "positive": ["a2", "b2"]}


def test_triplets_draw_negatives_from_other_texts_reproducibly() -> None:
    formed = form_examples(SCORED, "triplets", 0.8, seed=1)
    assert formed["anchor"] == ["a", "b"]
    for anchor, positive, negative in zip(formed["anchor"], formed["positive"], formed["negative"]):
        assert negative not in (anchor, positive)
    assert form_examples(SCORED, "triplets", 0.8, seed=1) == formed


def test_triplets_from_positive_pairs_take_other_rows_positives() -> None:
    pairs = {"anchor": ["q1", "q2", "q3"], "positive": ["p1", "p2", "p3"]}
    formed = form_examples(pairs, "triplets", 0.8, seed=0)
    assert all(
        n in {"p1", "p2", "p3"} and n != p for n, p in zip(formed["negative"], pairs["positive"])
    )


def test_binary_labels_every_pair() -> None:
    formed = form_examples(SCORED, "binary", 0.8, seed=0)
    assert formed["label"] == [1, 1, 0, 0] and formed["sentence1"] == SCORED["sentence1"]


def test_what_is_missing_is_named() -> None:
    with pytest.raises(
        SemsearchError, match="needs the columns sentence1, sentence2, score.*has text"
    ):
        form_examples({"text": ["x"]}, "binary", 0.8, seed=0)
    with pytest.raises(SemsearchError, match="lower --positive-at"):
        form_examples(SCORED, "positives", 0.95, seed=0)
