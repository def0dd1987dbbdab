"""`explain`: the plan of a search and where its time went, in every mode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.search.explain import explain_lines
from semsearch.search.searcher import Searcher
from tests.io.test_own_vectors import build, vector_corpus

ROWS = 2_000


@pytest.fixture(scope="module")
def searcher(tmp_path_factory, tiny_model_dir) -> Searcher:
    """An IVF index of texts with a BM25 part and a column to filter on."""
    folder = tmp_path_factory.mktemp("explain")
    corpus = folder / "c.parquet"
    texts = [
        f"package {i} parses {('json', 'yaml', 'toml', 'xml')[i % 4]} files" for i in range(ROWS)
    ]
    pq.write_table(
        pa.table({"id": [f"p{i}" for i in range(ROWS)], "text": texts, "n": list(range(ROWS))}),
        corpus,
    )
    options = BuildOptions(
        corpus=corpus,
        name="explained",
        id_column="id",
        model=str(tiny_model_dir),
        index="ivf",
        out_dir=folder,
        show_progress=False,
    )
    return Searcher(build_index(options), device="cpu")


def _time(plan: dict) -> dict:
    """The stages' seconds, checked to add up to the call's wall time."""
    time = plan["time"]
    total = sum(time["phases"].values()) - time["overlapped_s"] + time["other_s"]
    assert total == pytest.approx(time["wall_s"], abs=0.002)
    return time["phases"]


def test_a_dense_search_explains_its_structure_parameters_candidates_and_stages(searcher) -> None:
    results = searcher.search(["yaml files"], k=5, explain=True)
    plan = results.explain
    assert plan["mode"] == "dense" and plan["k"] == 5 and plan["queries"] == 1
    assert plan["index"]["structure"].startswith("IVF") and plan["index"]["rows"] == ROWS
    assert plan["search_params"] == searcher.manifest.index.search_params  # the tuned nprobe
    assert plan["segments_searched"] == 1 and plan["candidates"] == 5
    assert set(_time(plan)) == {"encode", "vector search", "metadata"}
    overridden = searcher.search(["yaml files"], k=5, explain=True, nprobe=3).explain
    assert overridden["search_params"] == {"nprobe": 3}
    assert searcher.search(["yaml files"], k=5).explain is None  # asked for only


def test_a_selective_filter_is_explained_as_exact_over_its_rows(searcher) -> None:
    plan = searcher.search(["json"], k=3, where="n < 40", explain=True).explain
    assert plan["filter"] == {
        "where": "n < 40",
        "matches": 40,
        "selectivity": 0.02,
        "strategy": "exact over the rows it keeps",
    }
    assert plan["search_params"] == {} and plan["candidates"] == 40
    assert "filter" in _time(plan)
    assert any(line.startswith("parameters: none (exact search)") for line in explain_lines(plan))


def test_a_filter_is_searched_the_way_that_scores_fewer_rows(searcher) -> None:
    """No fixed row threshold: a filter keeping fewer rows than the tuned IVF search scores is
    searched exactly over them; a broad one over every row, deeper, then kept (the choices
    between: tests/search/test_snapshot.py)."""
    tuned = searcher.manifest.index.search_params["nprobe"]
    lists = searcher.snapshot.segments[0].index.parameter_ceiling()
    scored = ROWS * tuned / lists  # rows an unfiltered search scores
    assert 1.5 * scored < ROWS / 2  # so a 50 % filter is cheaper searched approximately
    narrow = searcher.search(["json"], k=3, where=f"n < {int(scored)}", explain=True).explain
    assert narrow["filter"]["strategy"] == "exact over the rows it keeps"
    broad = searcher.search(["json"], k=3, where="n < 1000", explain=True).explain
    assert broad["filter"]["selectivity"] == 0.5
    assert broad["filter"]["strategy"] == (
        "approximate, over every row for the nearest 12, then the kept ones"
    )
    assert broad["search_params"] == {"nprobe": tuned} and broad["candidates"] == 12


def test_lexical_and_hybrid_searches_explain_their_stages(searcher) -> None:
    lexical = searcher.search(["toml"], k=4, mode="lexical", explain=True).explain
    assert "search_params" not in lexical
    assert set(_time(lexical)) == {"lexical", "metadata"}  # nothing encoded
    hybrid = searcher.search(["toml"], k=4, mode="hybrid", where="n >= 10", explain=True).explain
    assert hybrid["fusion"]["method"] == "adaptive" and hybrid["fusion"]["candidates_per_side"] > 4
    assert hybrid["filter"]["matches"] == ROWS - 10
    assert set(_time(hybrid)) == {
        "encode",
        "filter",
        "lexical",
        "vector search",
        "fusion",
        "metadata",
    }
    lines = explain_lines(hybrid)
    assert lines[0].startswith("plan: hybrid search, k 4, 1 query; index explained")
    assert any(line.startswith("fusion: adaptive") for line in lines)
    assert lines[-1].startswith("time: encode ") and "total" in lines[-1]


def test_a_disk_index_explains_the_candidates_it_rescored(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(60, 32))
    vectors = (centres[rng.integers(0, 60, 3000)] + 0.4 * rng.normal(size=(3000, 32))).astype(
        np.float32
    )
    corpus = vector_corpus(tmp_path / "c.parquet", vectors)
    folder = build(corpus, tmp_path / "idx", index="disk", target_recall=None, lexical=None)
    searcher = Searcher(folder, vectors_only=True)
    plan = searcher.search_vectors(vectors[:2], k=10, explain=True).explain
    oversample = searcher.manifest.index.search_params["oversample"]
    assert plan["queries"] == 2 and plan["search_params"]["oversample"] == oversample
    assert plan["rescored"] == 2 * 10 * oversample  # k x oversample for each query
    assert set(_time(plan)) == {"vector search", "rescore", "metadata"}  # vectors: no encoding
    assert any("rescored from their stored vectors" in line for line in explain_lines(plan))
