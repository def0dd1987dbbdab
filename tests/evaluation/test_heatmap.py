"""The similarity heat-map: a PNG on disk and the matrix it shows."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.evaluation import similarity_heatmap


def test_writes_a_png_of_the_cosine_matrix(table_encoder, tmp_path) -> None:
    encoder = table_encoder({"cat": [1, 0], "kitten": [3, 1], "stocks": [0, 2]})
    path = tmp_path / "heatmap.png"
    matrix = similarity_heatmap(encoder, ["cat", "kitten", "stocks"], path, title="toy")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_allclose(np.diag(matrix), 1.0)
    np.testing.assert_allclose(matrix, matrix.T)
    assert matrix[0, 1] == pytest.approx(3 / np.sqrt(10))
    assert matrix[0, 2] == pytest.approx(0.0)


def test_long_sentences_and_many_of_them_still_plot(tiny_encoder, tmp_path) -> None:
    sentences = [f"sentence number {i} " + "with many words " * 10 for i in range(25)]
    similarity_heatmap(tiny_encoder, sentences, tmp_path / "big.png")
    assert (tmp_path / "big.png").stat().st_size > 1000


def test_needs_two_sentences(table_encoder, tmp_path) -> None:
    with pytest.raises(ValueError, match="at least two"):
        similarity_heatmap(table_encoder({"a": [1.0]}), ["a"], tmp_path / "x.png")
