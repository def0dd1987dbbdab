"""`semsearch word-vectors` and `word-model`: from texts to an indexed word-vector model,
and bad input refused in one line with nothing written."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line

from semsearch.models.word_vectors import WordVectors, write_word_vectors

TEXTS = [
    "edit photos and images",
    "photo editor for raster images",
    "play chess online",
    "chess engine and board",
    "encrypt backups with keys",
] * 10


def test_trained_vectors_become_an_indexed_model(tmp_path, cli) -> None:
    pytest.importorskip("gensim")
    corpus = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS}), corpus)
    vectors, model = tmp_path / "v.txt", tmp_path / "model"
    result = cli(
        "word-vectors",
        str(vectors),
        "--text",
        f"{corpus}:text",
        "--dimension",
        "8",
        "--min-count",
        "2",
        "--epochs",
        "1",
    )
    assert result.exit_code == 0, result.output
    result = cli(
        "word-model",
        str(vectors),
        "--output",
        str(model),
        "--layer",
        "lstm",
        "--hidden",
        "4",
        "--pooling",
        "max",
        "--normalize",
    )
    assert result.exit_code == 0, result.output
    assert json.loads((model / "modules.json").read_text())[1]["path"] == "1_LSTM"
    result = cli(
        "build",
        str(corpus),
        "--model",
        str(model),
        "--name",
        "words",
        "--id-column",
        "id",
        "--out-dir",
        cli.index_dir,
    )
    assert result.exit_code == 0, result.output
    result = cli("query", "chess", "--index", "words", "--index-dir", cli.index_dir, "--json")
    assert result.exit_code == 0, result.output


def test_bad_vectors_and_options_are_one_line_and_write_nothing(tmp_path, cli) -> None:
    vectors = write_word_vectors(
        WordVectors(["a", "b"], np.ones((2, 4), np.float32)), tmp_path / "v.txt"
    )
    out = tmp_path / "model"
    cases = {
        "no word-vector file at": [str(tmp_path / "absent.txt")],
        "4-dimensional word vectors but 300 are needed": [str(vectors), "--dimension", "300"],
        "unknown layer 'gru'": [str(vectors), "--layer", "gru"],
        "unknown pooling 'sum'": [str(vectors), "--pooling", "sum"],
    }
    for message, arguments in cases.items():
        assert message in error_line(cli("word-model", *arguments, "--output", str(out)))
        assert not out.exists()
    assert "either --text" in error_line(cli("word-vectors", str(tmp_path / "w.txt")))
