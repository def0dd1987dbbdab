"""The lexical part written part by part: the same files bm25s writes from all texts at once,
and the same scores from postings alone."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from semsearch.store.lexical import (
    LexicalPart,
    LexicalSegment,
    build_bm25,
    lexical_search,
    write_lexical,
)
from semsearch.store.manifest import LexicalSpec

WORDS = "the cat sat on a mat running runs ran dogs dog quick quickly fox over lazy naïve 42 x"
MATRICES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy")


def _texts(count: int = 300) -> list[str]:
    rng = random.Random(0)
    texts = [
        " ".join(rng.choice(WORDS.split()) for _ in range(rng.randint(0, 9))) for _ in range(count)
    ]
    return texts + ["", "!!", "the a an"]  # no word, no term, only stop words


@pytest.mark.parametrize(
    "spec",
    [
        LexicalSpec(),
        LexicalSpec(method="robertson"),
        LexicalSpec(method="atire", stemmer="", stopwords=""),
    ],
)
def test_parts_make_the_files_bm25s_makes_from_every_text(tmp_path, spec: LexicalSpec) -> None:
    texts = _texts()
    build_bm25(texts, spec).save(tmp_path / "whole", show_progress=False)
    parts = (texts[start : start + 37] for start in range(0, len(texts), 37))
    written = tmp_path / write_lexical(tmp_path, parts, spec, 1)
    for name in MATRICES:
        whole, streamed = np.load(tmp_path / "whole" / name), np.load(written / name)
        assert whole.dtype == streamed.dtype
        assert np.array_equal(whole, streamed), name
    vocab = "vocab.index.json"
    assert (written / vocab).read_bytes() == (tmp_path / "whole" / vocab).read_bytes()
    params = "params.index.json"
    assert json.loads((written / params).read_text()) == json.loads(
        (tmp_path / "whole" / params).read_text()
    )
    assert not (written / ".pairs").exists()
    assert LexicalPart.read(written, len(texts)).documents == len(texts)


def test_no_text_with_a_word_still_makes_a_readable_part(tmp_path) -> None:
    written = tmp_path / write_lexical(tmp_path, iter([["", "!!"], ["the"]]), LexicalSpec(), 2)
    part = LexicalPart.read(written, 3)
    scores, rows = lexical_search(
        [LexicalSegment(part, 0)], LexicalSpec(), ["cat"], 2, np.ones(3, bool)
    )
    assert rows.tolist() == [[-1, -1]]


def test_matches_score_as_the_dense_sum_over_every_document() -> None:
    part = LexicalPart.of(build_bm25(_texts(), LexicalSpec()))
    terms = [part.vocab["dog"], part.vocab["quick"], part.vocab["cat"]]
    weights = [1.0, 0.5, 2.0]
    dense = np.zeros(part.documents)
    for term, weight in zip(terms, weights):
        span = slice(int(part.indptr[term]), int(part.indptr[term + 1]))
        np.add.at(dense, part.indices[span], part.data[span] * np.float32(weight))
    documents, scores = part.matches(terms, weights)
    assert documents.tolist() == np.flatnonzero(dense).tolist()
    assert np.allclose(scores, dense[documents], rtol=1e-12)
