"""Word vectors trained with gensim on a corpus's own text, cut the way the tokenizer cuts."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.training.word_vectors import (
    WordVectorOptions,
    corpus_texts,
    train_word_vectors,
    words_of,
)

TEXTS = [
    "Edit photos and images.",
    "A photo editor for raster images",
    "play chess online",
    "chess engine and GUI",
    "encrypt backups with GPG",
] * 20


def test_words_are_cut_as_the_tokenizer_cuts_them() -> None:
    assert words_of("Edit PHOTOS, (and) images.") == ["edit", "photos", "and", "images"]


def test_corpus_texts_reads_parquet_columns_and_refuses_bad_sources(tmp_path) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"short": ["a b", "", None], "long": ["c d", "e", "f"]}), path)
    assert corpus_texts([f"{path}:short,long"]) == ["a b", "c d", "e", "f"]
    with pytest.raises(SemsearchError, match="has no column\\(s\\) nope"):
        corpus_texts([f"{path}:nope"])
    with pytest.raises(SemsearchError, match="FILE.parquet:COLUMN"):
        corpus_texts([str(path)])


def test_word2vec_learns_a_vector_per_frequent_word() -> None:
    pytest.importorskip("gensim")
    options = WordVectorOptions(dimension=16, min_count=5, epochs=2, workers=1)
    vectors = train_word_vectors(TEXTS, options)
    assert {"chess", "images", "photos"} <= set(vectors.words)
    assert vectors.vectors.shape == (len(vectors.words), 16)
    with pytest.raises(SemsearchError, match="unknown method 'glove'"):
        train_word_vectors(TEXTS, WordVectorOptions(method="glove"))  # type: ignore[arg-type]
