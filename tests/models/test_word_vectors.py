"""Word vectors in word2vec text format: read back as written, bad files refused in one line."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from models.word_support import WORDS, tiny_vectors_file

from semsearch.errors import SemsearchError
from semsearch.models.word_vectors import (
    PADDING_TOKEN,
    WordVectors,
    read_word_vectors,
    write_word_vectors,
)


def test_vectors_read_back_as_written_with_or_without_header(tmp_path) -> None:
    path = tiny_vectors_file(tmp_path)
    vectors = read_word_vectors(path, dimension=8)
    assert vectors.words == WORDS and vectors.vectors.shape == (len(WORDS), 8)
    glove = tmp_path / "glove.txt.gz"  # GloVe's layout: no header line
    with gzip.open(glove, "wt", encoding="utf-8") as handle:
        handle.write("".join(path.read_text().splitlines(keepends=True)[1:]))
    np.testing.assert_allclose(read_word_vectors(glove).vectors, vectors.vectors)


def test_padding_is_a_zero_row_in_front_once(tmp_path) -> None:
    padded = read_word_vectors(tiny_vectors_file(tmp_path)).with_padding()
    assert padded.words[0] == PADDING_TOKEN and not padded.vectors[0].any()
    assert padded.with_padding() is padded


def test_a_missing_file_is_one_line(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="no word-vector file at .*semsearch word-vectors"):
        read_word_vectors(tmp_path / "absent.txt")


def test_a_file_of_another_dimension_is_refused(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="8-dimensional word vectors but 300 are needed"):
        read_word_vectors(tiny_vectors_file(tmp_path), dimension=300)


def test_a_ragged_or_binary_file_names_its_line(tmp_path) -> None:
    ragged = tmp_path / "ragged.txt"
    ragged.write_text("a 1 2 3\nb 1 2\n", encoding="utf-8")
    with pytest.raises(
        SemsearchError, match="line 2: 2 numbers where the file's first vector has 3"
    ):
        read_word_vectors(ragged)
    words = tmp_path / "words.txt"
    words.write_text("a 1 x\n", encoding="utf-8")
    with pytest.raises(SemsearchError, match="line 1: not a word followed by numbers"):
        read_word_vectors(words)


def test_writing_leaves_no_temporary_file(tmp_path) -> None:
    write_word_vectors(WordVectors(["a"], np.ones((1, 2), np.float32)), tmp_path / "v.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.txt"]
