"""Vectors from a .npy file or an index, and labelled pairs of their row numbers."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models import BiEncoder
from semsearch.training import load_vectors, read_vector_pairs


def test_vectors_from_npy_and_from_an_index_agree(tmp_path, corpus_file, tiny_model_dir) -> None:
    folder = build_index(
        BuildOptions(
            corpus=corpus_file,
            model=str(tiny_model_dir),
            device="cpu",
            out_dir=tmp_path / "idx",
            show_progress=False,
        )
    )
    from_index = load_vectors(index=folder.name, index_dir=tmp_path / "idx")
    texts = pq.read_table(corpus_file)["text"].to_pylist()
    expected = BiEncoder.load(str(tiny_model_dir), device="cpu").encode(texts)
    assert np.allclose(from_index, expected, atol=1e-5)
    np.save(tmp_path / "v.npy", expected)
    assert np.array_equal(load_vectors(tmp_path / "v.npy"), expected)


def test_bad_vector_sources(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="either a .npy file of vectors or an index"):
        load_vectors()
    with pytest.raises(SemsearchError, match="missing.npy does not exist"):
        load_vectors(tmp_path / "missing.npy")
    np.save(tmp_path / "flat.npy", np.zeros(4))
    with pytest.raises(SemsearchError, match="needs a 2-D float array"):
        load_vectors(tmp_path / "flat.npy")
    (tmp_path / "empty.npy").write_bytes(b"")
    with pytest.raises(SemsearchError, match="empty.npy is empty"):
        load_vectors(tmp_path / "empty.npy")


def test_pairs_are_checked_against_the_vectors(tmp_path) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text("a,b,same\n0,1,1\n2,3,0\n")
    pairs = read_vector_pairs(
        str(path), rows=4, columns={"row1": "a", "row2": "b", "label": "same"}
    )
    assert pairs.first.tolist() == [0, 2] and pairs.labels.tolist() == [1.0, 0.0]
    with pytest.raises(SemsearchError, match="row2 must hold row numbers from 0 to 2"):
        read_vector_pairs(str(path), rows=3, columns={"row1": "a", "row2": "b", "label": "same"})
    with pytest.raises(
        SemsearchError, match="needs the column\\(s\\) row1, row2, label.*has a, b, same"
    ):
        read_vector_pairs(str(path), rows=4)
