"""Property: on a `disk` index of own vectors, after any sequence of `add`, `delete` and
`compact`, a search answers from the live rows only, with their exact scores, and a search
wide enough to re-score every row equals numpy's exact top-k over the live rows.

Hypothesis builds a small tuned `disk` index (IVF-PQ, 300 rows of 16 dims), then runs random
steps against it and against a dict of id -> vector: adds of new and replaced ids, deletes,
compactions. After every step the index is searched twice: with every list probed and the
largest oversample (every row re-scored: the exact answer) and with one list probed (fewer
candidates than slots: FAISS pads with -1, which must never be read as a row).

The quick suite runs a fixed set of examples (derandomized, a few seconds);
SEMSEARCH_RESCORING_EXAMPLES=N runs N random ones.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from semsearch.errors import SemsearchError
from semsearch.index import Index
from semsearch.search.limits import MAX_OVERSAMPLE
from tests.io.test_own_vectors import build, vector_corpus

LONG_RUN = os.environ.get("SEMSEARCH_RESCORING_EXAMPLES")
MODEL_SETTINGS = settings(
    max_examples=int(LONG_RUN) if LONG_RUN else 8,
    derandomize=not LONG_RUN,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
FIRST_ROWS, DIMENSION = 300, 16  # a PQ codebook needs 256 rows to train
QUERIES = np.random.default_rng(99).normal(size=(4, DIMENSION)).astype(np.float32)


@dataclass(frozen=True)
class Add:
    numbers: tuple[int, ...]  # ids k<number>: new ones and some of the first rows, replaced
    seed: int


@dataclass(frozen=True)
class Delete:
    numbers: tuple[int, ...]


@dataclass(frozen=True)
class Compact:
    pass


NUMBERS = st.integers(0, FIRST_ROWS + 60)
STEPS = st.one_of(
    st.builds(
        Add,
        st.lists(NUMBERS, min_size=1, max_size=40, unique=True).map(tuple),
        st.integers(0, 2**16),
    ),
    st.builds(Delete, st.lists(NUMBERS, min_size=1, max_size=120).map(tuple)),
    st.just(Compact()),
)
ALL = tuple(range(FIRST_ROWS))


@MODEL_SETTINGS
# What re-scoring got wrong: FAISS's empty slots (-1) were read as row 0, which a segment
# written by `add` (or compacted after row 0 was deleted) does not hold.
@example(seed=1, k=200, steps=[Add(tuple(range(FIRST_ROWS, FIRST_ROWS + 40)), 2)])
@example(seed=2, k=10, steps=[Delete(ALL), Add(tuple(range(FIRST_ROWS, FIRST_ROWS + 30)), 3)])
@example(seed=3, k=10, steps=[Delete((0,)), Compact()])
@given(
    seed=st.integers(0, 2**16),
    k=st.sampled_from([2, 10, 200]),
    steps=st.lists(STEPS, min_size=1, max_size=4),
)
def test_disk_searches_follow_the_live_rows(seed: int, k: int, steps: list) -> None:
    folder = Path(tempfile.mkdtemp(prefix="rescoring-model-"))
    try:
        first = np.random.default_rng(seed).normal(size=(FIRST_ROWS, DIMENSION))
        index = Index(
            build(
                vector_corpus(folder / "c.parquet", first),
                folder / "idx",
                index="disk",
                lexical=None,
            )
        )
        assert index.manifest.index.requested == "disk"
        model = {f"k{number}": vector for number, vector in enumerate(first.astype(np.float32))}
        _check(index, model, k)
        for step in steps:
            if isinstance(step, Add):
                vectors = np.random.default_rng(step.seed).normal(size=(len(step.numbers), 16))
                index.add(_table(step.numbers, vectors))
                model.update({f"k{n}": v for n, v in zip(step.numbers, vectors.astype(np.float32))})
            elif isinstance(step, Delete):
                index.delete(ids=[f"k{number}" for number in step.numbers])
                for number in step.numbers:
                    model.pop(f"k{number}", None)
            elif model:
                index.compact()
            else:
                with pytest.raises(SemsearchError, match="no live rows"):
                    index.compact()
            _check(index, model, k)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _table(numbers: tuple[int, ...], vectors: np.ndarray) -> pa.Table:
    return pa.table(
        {
            "key": [f"k{number}" for number in numbers],
            "emb": pa.array(list(vectors.astype(np.float32)), pa.list_(pa.float32())),
            "year": [2000] * len(numbers),
        }
    )


def _check(index: Index, model: dict[str, np.ndarray], k: int) -> None:
    """Every row re-scored gives numpy's exact top-k over the live rows; one list probed
    gives live rows only, each with its exact score, best first."""
    assert index.manifest.rows == len(model)
    if not model:
        return
    keys = list(model)
    base = np.stack([model[key] for key in keys])
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    exact = (QUERIES / np.linalg.norm(QUERIES, axis=1, keepdims=True)) @ unit.T
    searcher = index.searcher()
    wide = searcher.search_vectors(QUERIES, k=k, nprobe=10_000, oversample=MAX_OVERSAMPLE)
    narrow = searcher.search_vectors(QUERIES, k=k, nprobe=1, oversample=1)
    for hits, narrow_hits, scores in zip(wide, narrow, exact):
        by_key = dict(zip(keys, scores))
        expected = np.sort(scores)[::-1][:k]
        found = np.array([hit.score for hit in hits])
        np.testing.assert_allclose(found, expected, atol=1e-5)
        np.testing.assert_allclose(found, [by_key[hit.id] for hit in hits], atol=1e-5)
        narrow_ids = [hit.id for hit in narrow_hits]
        assert len(set(narrow_ids)) == len(narrow_ids) <= k
        assert set(narrow_ids) <= set(model)
        narrow_scores = np.array([hit.score for hit in narrow_hits])
        np.testing.assert_allclose(narrow_scores, [by_key[key] for key in narrow_ids], atol=1e-5)
        assert np.all(np.diff(narrow_scores) <= 1e-6)
