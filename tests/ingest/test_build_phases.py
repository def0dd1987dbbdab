"""Where a build's and an add's time went: every phase reported, and together they make the wall time."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.update import add_rows

BUILD_PHASES = {
    "scan",
    "load model",
    "fingerprint",
    "read",
    "prepare",
    "tokenise",
    "encode",
    "write",
    "train",
    "add",
    "tune",
    "write index",
    "lexical",
    "hash",
}


def _corpus(path: Path, rows: int, start: int = 0) -> Path:
    texts = [f"package {i} does thing {i % 37} with {i % 11} widgets" for i in range(start, rows)]
    ids = [f"p{i}" for i in range(start, rows)]
    pq.write_table(pa.table({"id": ids, "text": texts}), path)
    return path


def _accounted(phases: dict) -> None:
    """The phases, less their overlap, plus the rest make the wall time; the rest is small."""
    total = sum(phases["phases"].values()) - phases["overlapped_s"] + phases["other_s"]
    assert total == pytest.approx(phases["wall_s"], abs=0.005)
    assert phases["other_s"] <= 0.1 * phases["wall_s"], phases


def test_a_build_reports_every_phase_and_they_make_its_wall_time(
    tmp_path, tiny_model_dir, caplog
) -> None:
    options = BuildOptions(
        corpus=_corpus(tmp_path / "corpus.parquet", 3000),
        name="timed",
        id_column="id",
        model=str(tiny_model_dir),
        index="ivf",
        out_dir=tmp_path,
        part_rows=500,
        show_progress=False,
    )
    with caplog.at_level(logging.INFO, logger="semsearch.ingest.build"):
        folder = build_index(options)
    manifest = folder.manifest()
    phases = manifest.operation["phases"]
    assert set(phases["phases"]) == BUILD_PHASES
    assert all(seconds >= 0 for seconds in phases["phases"].values())
    assert phases["phases"]["encode"] > 0 and phases["phases"]["train"] > 0
    assert phases["overlapped_s"] > 0  # reading and tokenising ran beside encoding
    _accounted(phases)
    assert manifest.build_seconds == pytest.approx(phases["wall_s"], abs=0.01)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("build timed")]
    assert "encode" in line and "overlapped" in line and "wall" in line


def test_an_add_reports_its_phases(tmp_path, tiny_model_dir) -> None:
    options = BuildOptions(
        corpus=_corpus(tmp_path / "corpus.parquet", 600),
        name="timed",
        id_column="id",
        model=str(tiny_model_dir),
        out_dir=tmp_path,
        show_progress=False,
    )
    folder = build_index(options)
    result = add_rows(folder, _corpus(tmp_path / "more.parquet", 900, start=500))
    manifest = folder.manifest()
    phases = manifest.operation["phases"]
    assert manifest.operation["kind"] == "add"
    assert {"read", "match", "load model", "encode", "write", "add", "lexical", "hash"} <= set(
        phases["phases"]
    )
    _accounted(phases)
    assert result.to_dict()["phases"] == phases  # what `add --json` prints


def test_a_build_of_your_own_vectors_reports_every_phase(tmp_path) -> None:
    """Nothing is encoded, so every second is reading, checking, hashing, writing or FAISS:
    each phase the 841k benchmark reports (`benchmarks/phases_family.py`) is here, with the
    scan's hash of the input and the preparing of each part overlapped with other work."""
    rows = 3000
    vectors = np.random.default_rng(0).normal(size=(rows, 8)).astype(np.float32)
    table = pa.table(
        {
            "id": [f"p{i}" for i in range(rows)],
            "text": [f"package {i} does thing {i % 37}" for i in range(rows)],
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 8),
        }
    )
    pq.write_table(table, tmp_path / "corpus.parquet")
    options = BuildOptions(
        corpus=tmp_path / "corpus.parquet",
        name="own",
        id_column="id",
        vector_column="emb",
        model=None,
        index="ivf",
        out_dir=tmp_path,
        part_rows=500,
        show_progress=False,
    )
    phases = build_index(options).manifest().operation["phases"]
    assert set(phases["phases"]) == BUILD_PHASES
    assert phases["phases"]["prepare"] > 0 and phases["phases"]["read"] > 0
    assert phases["phases"]["encode"] < phases["phases"]["prepare"]  # nothing was encoded
    _accounted(phases)
