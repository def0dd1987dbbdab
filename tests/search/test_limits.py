"""Per-call bounds: a parameter beyond what the index can use is clamped with a note or
refused in one line, never minutes of CPU and gigabytes of memory."""

from __future__ import annotations

import time

import pytest

from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.search import limits as search_limits
from semsearch.search.limits import MAX_QUERY_CHARS, bound_texts
from semsearch.search.searcher import Searcher


def _searcher(tmp_path, encoder, index: str, rows: int = 40) -> Searcher:
    path = tmp_path / "c.csv"
    path.write_text("doc_id,text\n" + "".join(f"{i},text number {i}\n" for i in range(rows)))
    options = BuildOptions(
        corpus=path,
        name="docs",
        id_column="doc_id",
        out_dir=tmp_path / "idx",
        index=index,
        show_progress=False,
        target_recall=None,
    )
    return Searcher(build_index(options, encoder=encoder), encoder=encoder)


def test_a_huge_ef_search_is_clamped_to_the_rows_with_a_note(tmp_path, tiny_encoder) -> None:
    searcher = _searcher(tmp_path, tiny_encoder, "hnsw")
    started = time.perf_counter()
    results = searcher.search(["text number 3"], k=5, efSearch=10**7)
    assert time.perf_counter() - started < 2  # unbounded: 10**7 slots, 10**9 took 32 s and 8 GB
    assert results.params == {"efSearch": 40} and results.k == 5
    assert results.notes == [
        "efSearch 10,000,000 clamped to 40 (HNSW's candidate list holds "
        "at most the largest segment's 40 rows)"
    ]
    exact = searcher.search(["text number 3"], k=5, efSearch=40)
    assert [hit.id for hit in results[0]] == [hit.id for hit in exact[0]] and not exact.notes


def test_ef_search_below_k_is_left_to_faiss_and_k_beyond_the_rows_has_a_note(
    tmp_path, tiny_encoder
) -> None:
    searcher = _searcher(tmp_path, tiny_encoder, "hnsw")
    results = searcher.search(["text"], k=100, efSearch=10**6)
    assert len(results[0]) == 40 and results.k == 40 and results.params == {"efSearch": 40}
    assert results.notes[0] == "k 100 clamped to 40 (the index holds 40 rows)"
    assert [note.split(" (")[0] for note in results.notes[1:]] == [
        "efSearch 1,000,000 clamped to 40"
    ]
    assert not searcher.search(["text"], k=40).notes  # every row, as asked: nothing to say


def test_k_beyond_the_rows_has_the_same_note_as_beyond_the_most_one_call_returns(
    tmp_path, tiny_encoder, monkeypatch
) -> None:
    """A small index clamps k to its rows as a large one clamps it to MAX_K: both say so."""
    searcher = _searcher(tmp_path, tiny_encoder, "flat", rows=20)
    monkeypatch.setattr(search_limits, "MAX_K", 30)
    assert searcher.search(["text"], k=2000).notes == [
        "k 2,000 clamped to 20 (the index holds 20 rows)"
    ]
    monkeypatch.setattr(search_limits, "MAX_K", 10)
    assert searcher.search(["text"], k=2000).notes == [
        "k 2,000 clamped to 10 (the most one call returns)"
    ]


def test_nprobe_is_clamped_to_the_number_of_lists(tmp_path, tiny_encoder) -> None:
    searcher = _searcher(tmp_path, tiny_encoder, "IVF4,Flat", rows=300)
    results = searcher.search(["text number 7"], k=3, nprobe=10**9)
    assert results.params == {"nprobe": 4}
    assert results.notes == [
        "nprobe 1,000,000,000 clamped to 4 (the index's number of IVF lists: it visits them all)"
    ]
    with pytest.raises(SemsearchError, match="nprobe must be at least 1, not 0"):
        searcher.search(["text"], k=3, nprobe=0)


@pytest.mark.parametrize(
    ("index", "given", "kept"),
    [
        ("flat", {"nprobe": 64}, {}),
        ("flat", {"efSearch": 100, "oversample": 8}, {}),
        ("hnsw", {"nprobe": 64, "efSearch": 20}, {"efSearch": 20}),
    ],
)
def test_a_parameter_the_index_does_not_take_is_dropped_with_a_note(
    tmp_path, tiny_encoder, index, given, kept
) -> None:
    """docs/serving.md's `"nprobe": 64` on the (flat) demo index: answered, with a note, as
    docs/search.md promises for values beyond what the index can use; it was refused."""
    searcher = _searcher(tmp_path, tiny_encoder, index)
    results = searcher.search(["text number 3"], k=3, **given)
    assert results.params == kept
    dropped = [name for name in given if name not in kept]
    assert results.notes == [
        f"{name} {given[name]} ignored: this index has no use for it (nprobe is for IVF "
        "indexes, efSearch for HNSW, oversample for disk; a flat index searches every row)"
        for name in dropped
    ]
    plain = searcher.search(["text number 3"], k=3, **kept)
    assert [hit.id for hit in results[0]] == [hit.id for hit in plain[0]] and not plain.notes


def test_k_beyond_the_most_one_call_returns_is_clamped(tmp_path, tiny_encoder, monkeypatch) -> None:
    searcher = _searcher(tmp_path, tiny_encoder, "flat")
    monkeypatch.setattr(search_limits, "MAX_K", 10)
    results = searcher.search(["text"], k=1000)
    assert len(results[0]) == 10 and results.notes == [
        "k 1,000 clamped to 10 (the most one call returns)"
    ]


def test_too_many_queries_or_results_per_call_are_refused(
    tmp_path, tiny_encoder, monkeypatch
) -> None:
    searcher = _searcher(tmp_path, tiny_encoder, "flat")
    monkeypatch.setattr(search_limits, "MAX_QUERIES_PER_CALL", 3)
    with pytest.raises(SemsearchError, match="4 queries in one call; the limit is 3"):
        searcher.search(["a", "b", "c", "d"], k=1)
    monkeypatch.setattr(search_limits, "MAX_RESULTS_PER_CALL", 50)
    with pytest.raises(SemsearchError, match="at most 2 queries per call"):
        searcher.search(["a", "b", "c"], k=20)
    assert search_limits.queries_per_call(20) == 2


def test_a_megabyte_query_is_cut_before_tokenising_with_a_note(tmp_path, tiny_encoder) -> None:
    searcher = _searcher(tmp_path, tiny_encoder, "flat")
    long = "text number 3 " * 100_000
    started = time.perf_counter()
    results = searcher.search([long, "short"], k=2)
    assert time.perf_counter() - started < 5
    assert results.notes == [
        f"query 1 cut to its first {MAX_QUERY_CHARS:,} of {len(long):,} "
        "characters (the model reads only its first few hundred tokens)"
    ]
    same = searcher.search([long[:MAX_QUERY_CHARS]], k=2)
    assert [hit.id for hit in results[0]] == [hit.id for hit in same[0]]


@pytest.mark.parametrize("text", ["\ud800", "caf\udce9", "ok \udfff end"])
def test_a_lone_surrogate_is_refused_in_one_line(text) -> None:
    with pytest.raises(
        SemsearchError, match=r"query 2 is not valid text: .*lone surrogate"
    ) as caught:
        bound_texts(["fine", text])
    assert "\n" not in str(caught.value) and "pass UTF-8 text" in str(caught.value)
