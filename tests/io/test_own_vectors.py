"""Indexes of your own vectors: built and added from a vector column, searched by vector."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.update import add_rows
from semsearch.search.searcher import Searcher
from semsearch.store.folders import IndexFolder

DIMENSION = 8


def vector_corpus(path: Path, vectors: np.ndarray, first_id: int = 0, **columns) -> Path:
    """A Parquet corpus of `vectors` (a list<float> column `emb`), ids and a year."""
    rows = len(vectors)
    table = pa.table(
        {
            "key": [f"k{first_id + i}" for i in range(rows)],
            "emb": pa.array(list(np.asarray(vectors, np.float32)), pa.list_(pa.float32())),
            "year": list(range(2000, 2000 + rows)),
            **columns,
        }
    )
    pq.write_table(table, path)
    return path


def build(corpus: Path, out_dir: Path, **options) -> IndexFolder:
    defaults = {"vector_column": "emb", "model": None, "id_column": "key", "show_progress": False}
    return build_index(BuildOptions(corpus=corpus, out_dir=out_dir, **{**defaults, **options}))


@pytest.fixture()
def vectors() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(48, DIMENSION)).astype(np.float32)


def exact_top_k(base: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Brute force cosine top-k with numpy."""
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    scores = queries / np.linalg.norm(queries, axis=1, keepdims=True) @ unit.T
    return np.argsort(-scores, axis=1, kind="stable")[:, :k], np.sort(scores, axis=1)[:, ::-1][
        :, :k
    ]


def test_a_flat_index_of_your_own_vectors_finds_the_exact_top_k(tmp_path, vectors) -> None:
    folder = build(vector_corpus(tmp_path / "c.parquet", vectors), tmp_path / "idx", index="flat")
    manifest = folder.manifest()
    assert manifest.own_vectors and not manifest.has_model
    assert manifest.source.vector_column == "emb" and manifest.text_column is None
    assert manifest.model.dimension == DIMENSION and manifest.lexical is None
    queries = np.random.default_rng(1).normal(size=(5, DIMENSION)).astype(np.float32)
    expected, scores = exact_top_k(vectors, queries, 10)
    results = Searcher(folder).search_vectors(queries, k=10)
    assert [[int(hit.id[1:]) for hit in hits] for hits in results] == expected.tolist()
    found = np.array([[hit.score for hit in hits] for hits in results])
    np.testing.assert_allclose(found, scores, atol=1e-5)
    assert results[0][0].metadata["year"] == 2000 + expected[0][0]
    assert "emb" not in results[0][0].metadata  # the vectors are not metadata
    assert results[0][0].text is None and "text" not in results[0][0].to_dict()  # none given
    stored = np.load(folder.path / "segments" / manifest.segments[0].name / "part-00000.npy")
    np.testing.assert_allclose(np.linalg.norm(stored, axis=1), 1, atol=1e-5)  # cosine: unit


def test_a_fixed_size_list_column_and_the_dot_metric_keep_the_vectors_as_given(
    tmp_path, vectors
) -> None:
    path = tmp_path / "c.parquet"
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSION)
    pq.write_table(pa.table({"emb": column}), path)
    folder = build(path, tmp_path / "idx", id_column=None, metric="dot")
    [hits] = Searcher(folder).search_vectors(vectors[3], k=1)  # one 1-D vector: one query
    assert hits[0].id == int(np.argmax(vectors @ vectors[3]))
    assert hits[0].score == pytest.approx(float(np.max(vectors @ vectors[3])), rel=1e-5)


def test_add_takes_vectors_from_the_same_column(tmp_path, vectors) -> None:
    folder = build(vector_corpus(tmp_path / "c.parquet", vectors), tmp_path / "idx")
    extra = np.random.default_rng(2).normal(size=(4, DIMENSION)).astype(np.float32)
    changed = np.concatenate([extra, vectors[:1] * -1])  # four new rows, k0 pointing away
    added = vector_corpus(tmp_path / "a.parquet", changed, first_id=48)
    added = pq.read_table(added).set_column(
        0, "key", pa.array([f"k{i}" for i in range(48, 52)] + ["k0"])
    )
    pq.write_table(added, tmp_path / "a.parquet")
    result = add_rows(folder, tmp_path / "a.parquet")
    assert (result.added, result.replaced) == (4, 1)
    searcher = Searcher(folder)
    [hits] = searcher.search_vectors(extra[2], k=1)
    assert hits[0].id == "k50" and hits[0].score == pytest.approx(1, abs=1e-5)
    [hits] = searcher.search_vectors(-vectors[0], k=1)
    assert hits[0].id == "k0"  # the replaced row's new vector
    assert add_rows(folder, tmp_path / "a.parquet").generation is None  # unchanged: nothing to do
    assert searcher.manifest.rows == 52


def test_add_refuses_vectors_of_another_size(tmp_path, vectors) -> None:
    folder = build(vector_corpus(tmp_path / "c.parquet", vectors), tmp_path / "idx")
    generation = folder.manifest().generation
    wrong = vector_corpus(tmp_path / "a.parquet", np.ones((3, DIMENSION + 1)), first_id=100)
    with pytest.raises(SemsearchError, match=r"9-d vector in row 0, the index's are 8-d"):
        add_rows(folder, wrong)
    assert folder.manifest().generation == generation
    assert len(folder.manifest().segments) == 1


def _ragged(path: Path) -> Path:
    pq.write_table(pa.table({"emb": [[1.0, 2.0], [1.0, 2.0, 3.0]]}), path)
    return path


def _with_nan(path: Path) -> Path:
    pq.write_table(pa.table({"emb": [[1.0, 2.0], [float("nan"), 1.0]]}), path)
    return path


def _with_inf(path: Path) -> Path:
    pq.write_table(pa.table({"emb": [[1.0, 2.0], [1.0, float("inf")]]}), path)
    return path


def _null_row(path: Path) -> Path:
    pq.write_table(pa.table({"emb": [[1.0, 2.0], None]}), path)
    return path


def _null_value(path: Path) -> Path:
    pq.write_table(pa.table({"emb": [[1.0, 2.0], [1.0, None]]}), path)
    return path


def _text_column(path: Path) -> Path:
    pq.write_table(pa.table({"emb": ["1.0, 2.0", "3.0, 4.0"]}), path)
    return path


def _strings_in_lists(path: Path) -> Path:
    pq.write_table(pa.table({"emb": [["a", "b"], ["c", "d"]]}), path)
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_ragged, r"3-d vector in row 1, row 0's are 2-d"),
        (_with_nan, r"NaN or infinite values in row 1"),
        (_with_inf, r"NaN or infinite values in row 1"),
        (_null_row, r"'emb' is null in row 1"),
        (_null_value, r"null value in row 1"),
        (_text_column, r"holds string, not lists of numbers"),
        (_strings_in_lists, r"not lists of numbers"),
    ],
)
def test_bad_vector_columns_are_refused_in_one_line_and_nothing_is_written(
    tmp_path, make, message
) -> None:
    out_dir = tmp_path / "idx"
    with pytest.raises(SemsearchError, match=message):
        build(make(tmp_path / "c.parquet"), out_dir, id_column=None)
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_a_missing_vector_column_is_named(tmp_path, vectors) -> None:
    with pytest.raises(SemsearchError, match=r"vector column 'vec' is not in c.parquet"):
        build(vector_corpus(tmp_path / "c.parquet", vectors), tmp_path / "idx", vector_column="vec")


@pytest.mark.parametrize(
    ("queries", "message"),
    [
        (np.ones((2, DIMENSION + 1)), r"are 9-d; the index holds 8-d"),
        (np.array([[np.nan] * DIMENSION]), r"NaN or infinite values \(query row 0\)"),
        (np.array([[np.inf] * DIMENSION]), r"NaN or infinite values"),
        ([[1.0] * DIMENSION, [1.0] * 3], r"ragged"),
        (np.ones((2, 2, DIMENSION)), r"must be a 2-D array"),
        (np.array([["a"] * DIMENSION]), r"not numbers"),
    ],
)
def test_bad_query_vectors_are_refused(tmp_path, vectors, queries, message) -> None:
    searcher = Searcher(build(vector_corpus(tmp_path / "c.parquet", vectors), tmp_path / "idx"))
    with pytest.raises(SemsearchError, match=message):
        searcher.search_vectors(queries, k=3)


def test_a_text_query_without_a_model_is_one_clear_line(tmp_path, vectors) -> None:
    searcher = Searcher(build(vector_corpus(tmp_path / "c.parquet", vectors), tmp_path / "idx"))
    with pytest.raises(SemsearchError) as refused:
        searcher.search(["a guitar"])
    assert str(refused.value) == (
        "index 'c' holds your own vectors and names no model: query with --vectors FILE.npy, "
        "or rebuild with --model NAME"
    )


def test_with_the_model_that_made_them_text_queries_work(
    tmp_path, tiny_encoder, tiny_model_dir, sentences
) -> None:
    made = tiny_encoder.encode(sentences)
    corpus = vector_corpus(tmp_path / "c.parquet", made, text=sentences)
    folder = build(corpus, tmp_path / "idx", model=str(tiny_model_dir), device="cpu")
    manifest = folder.manifest()
    assert manifest.has_model and manifest.model.fingerprint == tiny_encoder.fingerprint
    assert manifest.text_column == "text" and manifest.lexical is not None
    searcher = Searcher(folder, encoder=tiny_encoder)
    [hits] = searcher.search([sentences[4]], k=3)
    assert hits[0].id == "k4" and hits[0].text == sentences[4]
    assert hits[0].score == pytest.approx(1, abs=1e-4)
    [lexical] = searcher.search(["guitar"], k=2, mode="lexical")
    assert lexical[0].text in sentences[:2]


def test_vectors_of_another_size_than_the_named_model_s_are_refused(
    tmp_path, tiny_model_dir, vectors
) -> None:
    with pytest.raises(SemsearchError, match=r"are 8-d, but model .* makes 32-d"):
        build(
            vector_corpus(tmp_path / "c.parquet", vectors),
            tmp_path / "idx",
            model=str(tiny_model_dir),
            device="cpu",
        )
    assert not (tmp_path / "idx" / "c").exists()


def test_a_bm25_part_needs_texts(tmp_path, vectors) -> None:
    from semsearch.ingest.maintain import set_lexical
    from semsearch.store.manifest import LexicalSpec

    folder = build(vector_corpus(tmp_path / "c.parquet", vectors), tmp_path / "idx")
    with pytest.raises(SemsearchError, match=r"holds your own vectors without texts"):
        set_lexical(folder, LexicalSpec())
    assert folder.manifest().generation == 1


def test_vectors_come_from_one_file_on_either_engine(tmp_path, vectors) -> None:
    """A folder is refused; the message no longer says --engine ray is, since a single
    vector file builds there (tests/distributed/test_segments.py)."""
    (tmp_path / "many").mkdir()
    vector_corpus(tmp_path / "many" / "c.parquet", vectors)
    with pytest.raises(SemsearchError) as refused:
        build(tmp_path / "many", tmp_path / "idx")
    assert str(refused.value) == (
        "--vector-column reads one corpus file (on --engine local or ray): pass a single "
        "file, not a folder or a glob"
    )


def _one_hash_a_row(vectors: np.ndarray, salts: np.ndarray) -> np.ndarray:
    """The stored hash as first defined: BLAKE2b-64 of a row's float32 bytes then its salt."""
    import hashlib

    return np.array(
        [
            int.from_bytes(
                hashlib.blake2b(
                    row.tobytes() + int(salt).to_bytes(8, "little", signed=True), digest_size=8
                ).digest(),
                "little",
                signed=True,
            )
            for row, salt in zip(np.ascontiguousarray(vectors, np.float32), salts)
        ],
        dtype=np.int64,
    )


@pytest.mark.parametrize("dimension", [1, 8, 384])
def test_vector_hashes_keep_the_values_indexes_store(dimension) -> None:
    from semsearch.io.own_vectors import vector_hashes

    rng = np.random.default_rng(dimension)
    vectors = rng.normal(size=(37, dimension)).astype(np.float32)
    salts = rng.integers(-(2**63), 2**63 - 1, 37, dtype=np.int64)
    assert vector_hashes(vectors, salts).tolist() == _one_hash_a_row(vectors, salts).tolist()
    unsalted = vector_hashes(vectors[::2], None)  # a strided view; no text: a zero salt
    assert unsalted.tolist() == _one_hash_a_row(vectors[::2], np.zeros(19, np.int64)).tolist()
    assert vector_hashes(vectors[:0], None).shape == (0,)
