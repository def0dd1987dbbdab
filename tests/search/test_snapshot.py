"""Searching a generation: filters equal brute force, per-call parameters are thread-safe."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from living_support import build, generated_table, wide_search_params, write

from semsearch.ann.base import IdFilter
from semsearch.errors import SemsearchError
from semsearch.search import filter_plan
from semsearch.search import snapshot as snapshot_module
from semsearch.search.searcher import Searcher

QUERIES = ["guitar cat", "rocket planet number 40", "cake recipe", "json parser", "drum piano"]


def _brute_force(searcher: Searcher, where_rows: np.ndarray, k: int) -> list[list]:
    """The exact top-k ids among `where_rows`, straight from numpy."""
    segments = [open_segment.segment for open_segment in searcher.snapshot.segments]
    stored = np.concatenate([vectors for s in segments for _, vectors in s.iter_parts()])
    vectors = stored[where_rows].astype(np.float32)
    queries = searcher.encoder.encode(QUERIES)
    scores = queries @ vectors.T
    ids = searcher.metadata.column("doc").to_pylist()
    return [[ids[where_rows[i]] for i in np.argsort(-line, kind="stable")[:k]] for line in scores]


def _approximate_filters(monkeypatch, then_kept: bool) -> None:
    """Filters searched approximately: FAISS skipping the dropped rows, or (`then_kept`) the
    unfiltered search deeper, the kept rows taken."""
    monkeypatch.setattr(filter_plan, "EXACT_FILTER_ROWS", 0)
    monkeypatch.setattr(filter_plan, "EXACT_FILTER_SHARE", 0.0)
    monkeypatch.setattr(filter_plan, "POST_FILTER_SHARE", 0.0 if then_kept else 2.0)


@pytest.mark.parametrize("then_kept", [False, True], ids=["faiss-skips", "then-kept"])
@pytest.mark.parametrize("index_type", ["flat", "IVF8,Flat", "hnsw"])
@pytest.mark.parametrize(
    "where", ["year >= 2012", "license = 'MIT'", "doc IN ('d3', 'd77', 'd140')"]
)
def test_filtered_results_equal_brute_force_over_the_matching_rows(
    tmp_path, tiny_encoder, index_type, where, then_kept, monkeypatch
) -> None:
    folder = build(
        write(generated_table(400), tmp_path / "a.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        index_type,
        target_recall=None,
    )
    _approximate_filters(monkeypatch, then_kept)
    searcher = Searcher(folder, tiny_encoder)
    rows = np.flatnonzero(searcher.snapshot.where_mask(where))
    k = 10
    widest = wide_search_params(index_type, nprobe=8, ef_search=400)
    results = searcher.search(QUERIES, k=k, where=where, **widest)
    assert all(len(hits) == min(k, len(rows)) for hits in results)
    expected = _brute_force(searcher, rows, k)
    got = [[hit.id for hit in hits] for hits in results]
    overlap = np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(got, expected)])
    assert overlap >= (1.0 if index_type == "flat" else 0.95)


def test_bad_where_is_one_clear_error(tmp_path, tiny_encoder) -> None:
    searcher = Searcher(
        build(write(generated_table(20), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder),
        tiny_encoder,
    )
    with pytest.raises(
        SemsearchError, match="column 'colour'.*columns are: doc, text, year, license"
    ):
        searcher.search(["x"], where="colour = 'red'")
    with pytest.raises(
        SemsearchError, match=r"year >=.: syntax error at or near \">=\" \(character 6\)"
    ):
        searcher.search(["x"], where="year >=")
    with pytest.raises(SemsearchError, match="not true/false"):
        searcher.search(["x"], where="year + 1")
    assert searcher.search(["x"], where="year > 3000") == [[]]


def test_one_searcher_many_threads_each_with_its_own_nprobe(tmp_path, tiny_encoder) -> None:
    folder = build(
        write(generated_table(600), tmp_path / "a.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        "IVF16,Flat",
        target_recall=None,
    )
    searcher = Searcher(folder, tiny_encoder)
    settings = [1, 2, 3, 4, 6, 8, 12, 16]
    sequential = {
        n: [[h.id for h in hits] for hits in searcher.search(QUERIES, k=10, nprobe=n)]
        for n in settings
    }
    assert sequential[1] != sequential[16]  # the parameter matters on this index

    def run(nprobe: int) -> tuple[int, list]:
        return nprobe, [
            [h.id for h in hits]
            for _ in range(5)
            for hits in searcher.search(QUERIES, k=10, nprobe=nprobe)
        ][: len(QUERIES)]

    with ThreadPoolExecutor(8) as pool:
        threaded = dict(pool.map(run, settings * 3))
    assert threaded == sequential


def test_a_searcher_keeps_its_generation_until_refreshed(tmp_path, tiny_encoder) -> None:
    from semsearch.index import Index

    index = Index(
        build(write(generated_table(50), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder)
    )
    searcher = index.searcher(encoder=tiny_encoder)
    index.delete(where="year < 2010")
    assert searcher.generation == 1 and len(searcher.search(["cat"], k=50)[0]) == 50
    assert searcher.refresh() and searcher.generation == 2
    assert len(searcher.search(["cat"], k=50)[0]) == 30
    old = index.searcher(encoder=tiny_encoder, at=1)
    assert len(old.search(["cat"], k=50)[0]) == 50 and not old.refresh()
    with pytest.raises(SemsearchError, match="no generation 9"):
        index.searcher(encoder=tiny_encoder, at=9)


def test_a_small_added_segment_of_an_ivf_index_is_searched_exactly(tmp_path, tiny_encoder) -> None:
    from semsearch.ann.vector_index import ExactStandIn
    from semsearch.index import Index

    folder = build(
        write(generated_table(400), tmp_path / "a.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        "IVF16,Flat",
        target_recall=None,
    )
    Index(folder).add(
        write(generated_table(12, start=400), tmp_path / "b.parquet"), encoder=tiny_encoder
    )
    Index(folder).delete(ids=["d405"])
    searcher = Searcher(folder, tiny_encoder)
    big, small = (open_segment.index for open_segment in searcher.snapshot.segments)
    # 400 rows > 16 lists > 12 rows
    assert not isinstance(big, ExactStandIn) and isinstance(small, ExactStandIn)
    rows = np.flatnonzero(searcher.snapshot.live)
    expected = _brute_force(searcher, rows, 5)
    got = [[hit.id for hit in hits] for hits in searcher.search(QUERIES, k=5, nprobe=16)]
    assert got == expected and "d405" not in {i for ids in got for i in ids}


def test_opening_a_missing_index_says_so_at_once(tmp_path) -> None:
    import time

    from semsearch.store.folders import IndexFolder

    started = time.monotonic()
    with pytest.raises(SemsearchError) as refused:
        snapshot_module.open_snapshot(IndexFolder(tmp_path / "nowhere"))
    assert time.monotonic() - started < 3  # not the 10 s meant for a folder being replaced
    assert "replaced" not in str(refused.value)


def test_a_filter_widens_a_disk_index_oversample_by_the_root_of_its_scale() -> None:
    """A filter keeping 1 in 20 (scale 60) re-scores ~8x the candidates, within the bound."""
    plan = filter_plan.plan_filter(
        5_000_000, 100_000_000, 10, {"oversample": 4, "nprobe": 16}, [], rescoring=True
    )
    assert plan.params == {"oversample": 31, "nprobe": 1}  # no lists: the ceiling is 1
    assert filter_plan.widen({"oversample": 200}, 60.0, [], oversample_scale=8)["oversample"] == 256
    assert filter_plan.widen({"efSearch": 16}, 60.0, []) == {"efSearch": 960}


class _Lists:
    """An IVF index's size and lists, as the planner sees one."""

    def __init__(self, size: int, lists: int | None) -> None:
        self.size, self.lists = size, lists

    def parameter_ceiling(self) -> int | None:
        return self.lists


@pytest.mark.parametrize(
    "share, strategy",
    [
        (0.0001, "exact"),
        (0.01, "exact"),  # 8,400 rows: fewer than the 26,500 the IVF search scores
        (0.05, "widened x2.83"),  # 42,000: more than 1.5 x those
        (0.1, "widened x2"),
        (0.2, "then kept"),
        (0.5, "then kept"),
    ],
)
def test_a_filter_is_planned_the_cheapest_way_for_its_share(share, strategy) -> None:
    """841k rows, IVF4096 at nprobe 129 (the PyPI index): the choices measured there."""
    rows = 841_708
    index = _Lists(rows, 4096)
    matches = round(share * rows)
    plan = filter_plan.plan_filter(matches, rows, 10, {"nprobe": 129}, [index], False)
    if strategy == "exact":
        assert plan.exact
        return
    widened = math.ceil(129 * max(1.0, math.sqrt(0.4 * rows / matches)))
    assert not plan.exact and plan.params == {"nprobe": widened}
    if strategy == "then kept":  # FAISS's id check would cost more than it saves
        assert plan.then_kept and plan.depth == math.ceil(2 * 10 / share)
    else:
        assert not plan.then_kept and plan.depth == 10 and strategy in plan.strategy


def test_a_broad_filter_whose_kept_rows_lie_far_away_is_still_answered_exactly(
    tmp_path, tiny_encoder, monkeypatch
) -> None:
    """The unfiltered search's nearest rows may all be dropped: each query left short of k
    kept rows is searched again with FAISS skipping the dropped ones."""
    folder = build(
        write(generated_table(400), tmp_path / "a.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        "flat",
        target_recall=None,
    )
    _approximate_filters(monkeypatch, then_kept=True)
    searcher = Searcher(folder, tiny_encoder)
    everything = np.arange(400)
    nearest = {doc for hits in _brute_force(searcher, everything, 200)[:1] for doc in hits}
    where = "doc NOT IN (" + ", ".join(f"'{doc}'" for doc in sorted(nearest)) + ")"
    rows = np.flatnonzero(searcher.snapshot.where_mask(where))
    assert len(rows) == 200  # half the rows: searched over every row for the nearest 40
    got = searcher.search(QUERIES[:1], k=10, where=where, explain=True)
    assert got.explain["queries_searched_again"] == 1
    assert [[hit.id for hit in hits] for hits in got] == _brute_force(searcher, rows, 10)[:1]


def test_a_filter_builds_its_faiss_id_filter_once(tmp_path, tiny_encoder, monkeypatch) -> None:
    """Building the id bitmap cost about half an unfiltered search at 200k rows: once a filter."""
    folder = build(
        write(generated_table(400), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder, "ivf"
    )
    _approximate_filters(monkeypatch, then_kept=False)
    searcher = Searcher(folder, tiny_encoder)
    built = []
    original = IdFilter.of
    monkeypatch.setattr(IdFilter, "of", lambda ids, bound: built.append(1) or original(ids, bound))
    first = searcher.search(QUERIES, k=5, where="year >= 2012")
    again = searcher.search(QUERIES, k=5, where="year >= 2012")
    assert len(built) == len(searcher.snapshot.segments) == 1
    assert [[hit.id for hit in hits] for hits in first] == [
        [hit.id for hit in hits] for hits in again
    ]
