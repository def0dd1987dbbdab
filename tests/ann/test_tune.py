"""Tuning nprobe/efSearch to a recall target against exact search."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from semsearch.ann.exact import exact_knn
from semsearch.ann.factory import IndexSpec, choose_index
from semsearch.ann.tune import (
    StoredScores,
    TuningResult,
    enforce_target,
    recall_at_k,
    rescored_recall,
    shortfall,
    tie_aware_recall,
    tune_against_exact,
    tune_index,
)
from semsearch.ann.vector_index import VectorIndex, prepare_vectors
from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.maintain import reindex, retune
from semsearch.options import DEFAULT_TARGET_RECALL


def _clustered(rows: int = 4000, dimension: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, dimension))
    points = centres[rng.integers(0, 40, rows)] + 0.6 * rng.normal(size=(rows, dimension))
    return prepare_vectors(points, "cosine")


def _ivf(vectors: np.ndarray) -> VectorIndex:
    index = VectorIndex.create(
        choose_index("ivf", len(vectors), vectors.shape[1], "cosine"), vectors.shape[1]
    )
    index.train(vectors)
    index.add(vectors, np.arange(len(vectors)))
    return index


def _exact(queries: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact scores and ids (= row numbers) of each query's k nearest `vectors`."""
    return exact_knn(queries, [(np.arange(len(vectors)), vectors)], k, "cosine")


def test_a_tie_swapped_at_rank_k_is_a_hit_for_tie_aware_recall() -> None:
    exact_rows = np.array([[1, 2]])
    found_rows, found_scores = np.array([[1, 3]]), np.array([[0.95, 0.9]], dtype=np.float32)
    kth_exact = np.array([0.9], dtype=np.float32)  # rows 2 and 3 are identical texts
    assert recall_at_k(found_rows, exact_rows, 2) == 0.5
    assert tie_aware_recall(found_scores, found_rows, kth_exact, 2, higher_is_better=True) == 1.0
    worse = np.array([[0.95, 0.8]], dtype=np.float32)
    assert tie_aware_recall(worse, found_rows, kth_exact, 2, higher_is_better=True) == 0.5
    distances = np.array([[0.1, 0.2]], dtype=np.float32)
    assert tie_aware_recall(distances, found_rows, np.array([0.15]), 2, False) == 0.5


def test_rescored_recall_judges_found_rows_on_their_true_scores() -> None:
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    queries = np.array([[1.0, 0.0]], dtype=np.float32)
    kth = np.array([0.8], dtype=np.float32)  # exact top-2: row 0 (1.0), then row 1 or 2 (0.8)
    assert rescored_recall(np.array([[0, 2]]), queries, vectors, kth, "dot") == 1.0
    assert rescored_recall(np.array([[0, 3]]), queries, vectors, kth, "dot") == 0.5
    assert rescored_recall(np.array([[0, -1]]), queries, vectors, kth, "dot") == 0.5
    squared = np.array([0.4], dtype=np.float32)  # |(1,0) - (0.8,0.6)|^2
    assert rescored_recall(np.array([[0, 1]]), queries, vectors, squared, "l2") == 1.0
    assert rescored_recall(np.array([[0, 3]]), queries, vectors, squared, "l2") == 0.5
    assert rescored_recall(np.array([[0, 3]]), queries, vectors, kth - 0.3, "dot") == 0.5
    assert rescored_recall(np.array([[0, 3]]), queries, vectors, kth - 0.3, "dot", 0.6) == 1.0


def test_duplicated_vectors_need_no_more_nprobe_when_ties_count() -> None:
    vectors = np.repeat(_clustered(1000), 3, axis=0)  # every vector three times
    index = _ivf(vectors)
    rows = np.arange(0, 3000, 30)
    scores, exact = _exact(vectors[rows], vectors, 11)
    by_rows = tune_index(index, vectors[rows], exact, target=0.95, k=10, query_ids=rows)
    tie_aware = tune_index(
        index, vectors[rows], exact, target=0.95, k=10, query_ids=rows, exact_scores=scores
    )
    assert tie_aware.met and tie_aware.value <= by_rows.value
    assert all(
        tie_aware.tried[v] >= by_rows.tried[v] - 1e-9
        for v in tie_aware.tried.keys() & by_rows.tried.keys()
    )


def test_a_coded_index_is_judged_on_exact_scores_of_what_it_found() -> None:
    """SQfp16 scores are estimates: its answers are scored again from the stored vectors,
    so rows tied at rank k count as found, as for IVF-Flat, and nothing else does."""
    vectors = np.repeat(_clustered(1000), 3, axis=0)  # neighbours come in identical triples
    ids = np.arange(len(vectors)) + 100  # ids are not row numbers
    index = VectorIndex.create(IndexSpec("IVF16,SQfp16", "IVF16,SQfp16", "cosine", {}), 16)
    index.train(vectors)
    index.add(vectors, ids)
    rows = np.arange(0, 3000, 30)
    parts = lambda: iter([(ids[:1000], vectors[:1000]), (ids[1000:], vectors[1000:])])  # noqa: E731
    scores, exact = exact_knn(vectors[rows], parts(), 11, "cosine")
    by_ids = tune_index(
        index, vectors[rows], exact, 0.95, k=10, query_ids=ids[rows], exact_scores=scores
    )
    rescored = tune_against_exact(index, vectors[rows], parts, 0.95, k=10, query_ids=ids[rows])
    assert rescored.met and rescored.value <= by_ids.value
    assert all(
        rescored.tried[v] >= by_ids.tried[v] - 1e-9
        for v in rescored.tried.keys() & by_ids.tried.keys()
    )
    every_list = tune_index(
        index,
        vectors[rows],
        exact,
        1.0,
        k=10,
        query_ids=ids[rows],
        exact_scores=scores,
        rescore=StoredScores(parts, "cosine"),
    )
    assert every_list.recall >= 0.99  # fp16 may only swap neighbours closer than its rounding
    found = index.search(vectors[rows], 5)[1]
    exact_again = StoredScores(parts, "cosine")(vectors[rows], found)
    expected = np.einsum("qd,qkd->qk", vectors[rows], vectors[found - 100])
    assert np.allclose(exact_again, expected, atol=1e-5)


def test_tuning_picks_the_smallest_nprobe_meeting_the_target() -> None:
    vectors = _clustered()
    index = _ivf(vectors)
    rows = np.arange(0, 4000, 20)
    _, exact = _exact(vectors[rows], vectors, 11)
    result = tune_index(index, vectors[rows], exact, target=0.9, k=10, query_ids=rows)
    assert result.met and result.parameter == "nprobe" and result.recall >= 0.9
    assert result.tried[result.value] >= 0.9
    if result.value > 1:
        assert result.tried[result.value - 1] < 0.9  # the value below was measured and missed
    assert result.value < index.parameter_ceiling()
    assert index.search(vectors[rows], 10)[1].shape == (len(rows), 10)  # tuning changed nothing


def test_a_ceiling_bounds_the_values_tried() -> None:
    vectors = _clustered()
    index = _ivf(vectors)
    rows = np.arange(0, 4000, 20)
    _, exact = _exact(vectors[rows], vectors, 11)
    result = tune_index(index, vectors[rows], exact, target=1.0, k=10, query_ids=rows, ceiling=4)
    assert max(result.tried) <= 4 and result.value <= 4


def test_climbing_stops_where_coarse_codes_stop_gaining_recall() -> None:
    """IVF-PQ with 2 bytes a row, compared by ids: recall stalls far below 1.0 once the near
    lists are probed; stopping there saves probing every list."""
    vectors = _clustered()
    index = VectorIndex.create(choose_index("IVF64,PQ2x4np", 4000, 16, "cosine"), 16)
    index.train(vectors)
    index.add(vectors, np.arange(4000))
    rows = np.arange(0, 4000, 20)
    _, exact = _exact(vectors[rows], vectors, 11)
    climbing = tune_index(index, vectors[rows], exact, 0.99, k=10, query_ids=rows)
    stopping = tune_index(index, vectors[rows], exact, 0.99, 10, rows, stop_on_plateau=True)
    assert not climbing.met and max(climbing.tried) == 64  # every list, to no avail
    assert not stopping.met and max(stopping.tried) < 64
    assert stopping.recall >= max(climbing.tried.values()) - 0.01


def _tuned_hnsw(rows: int, target: float):
    """An HNSW index over clustered vectors, tuned on every 20th of them as held-out queries."""
    vectors = _clustered(rows)
    index = VectorIndex.create(choose_index("hnsw", rows, 16, "cosine"), 16)
    index.add(vectors, np.arange(rows))
    queries = np.arange(0, rows, 20)
    _, exact = _exact(vectors[queries], vectors, 11)
    return tune_index(index, vectors[queries], exact, target=target, k=10, query_ids=queries)


def test_unreachable_target_reports_the_best_it_found() -> None:
    result = _tuned_hnsw(2000, target=1.0)
    assert result.parameter == "efSearch" and result.value in result.tried


def test_efsearch_is_never_tuned_below_k_on_an_easy_corpus() -> None:
    result = _tuned_hnsw(300, target=0.5)
    assert result.met and result.parameter == "efSearch"
    assert result.value >= 10
    assert min(result.tried) >= 10


def test_exact_index_and_bad_target_are_refused() -> None:
    vectors = _clustered(100)
    flat = VectorIndex.create(choose_index("flat", 100, 16, "cosine"), 16)
    flat.add(vectors, np.arange(100))
    with pytest.raises(SemsearchError, match="nothing to tune"):
        tune_index(flat, vectors[:5], np.zeros((5, 10), dtype=np.int64), 0.9)
    with pytest.raises(SemsearchError, match="target recall"):
        tune_index(flat, vectors[:5], np.zeros((5, 10), dtype=np.int64), 1.5)


def _corpus(tmp_path, rows: int, template: str):
    path = tmp_path / "c.csv"
    path.write_text(
        "text\n" + "".join(template.format(i=i, a=i % 31, b=i % 7) + "\n" for i in range(rows))
    )
    return path


@pytest.mark.slow  # about 7 s: it trains and searches a PQ index
def test_a_compressed_index_is_retuned_from_its_stored_vectors(tmp_path, tiny_encoder) -> None:
    # The PQ codes cannot give back the vectors, but the segment stores them: exact search
    # over those is the ground truth, and the retuned nprobe goes into a new generation.
    path = _corpus(tmp_path, 1200, "record {i} in family {a} of kind {b}")
    folder = build_index(
        BuildOptions(
            corpus=path,
            name="pq",
            out_dir=tmp_path / "idx",
            index="ivfpq",
            target_recall=None,
            show_progress=False,
        ),
        encoder=tiny_encoder,
    )
    first = folder.manifest()
    assert ",PQ" in first.index.factory and first.tuning is None
    result = retune(folder, 0.6, sample=100)
    assert result.parameter == "nprobe" and result.queries == 100 and result.target == 0.6
    assert result.recall == result.tried[result.value] and 0 < result.recall <= 1
    assert result.met == (result.recall >= 0.6)  # PQ scores are estimates: met is not certain
    if not result.met:  # the best recall measured, not the largest value tried
        assert result.recall == max(result.tried.values())
    manifest = folder.manifest()
    assert manifest.generation == first.generation + 1 and manifest.operation["kind"] == "tune"
    assert manifest.index.search_params == result.search_params()  # ivfpq: disk's oversample too
    assert manifest.tuning == json.loads(json.dumps(result.to_dict()))
    assert manifest.segments == first.segments  # the index files are not rewritten
    assert folder.manifest(first.generation) == first


def test_build_with_target_recall_records_the_tuning(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "c.csv"
    path.write_text(
        "text\n" + "".join(f"item {i} of group {i % 23} in set {i % 7}\n" for i in range(1500))
    )
    options = BuildOptions(
        corpus=path,
        name="t",
        out_dir=tmp_path / "idx",
        index="ivf",
        target_recall=0.9,
        show_progress=False,
    )
    manifest = build_index(options, encoder=tiny_encoder).manifest()
    assert manifest.tuning["met"] and manifest.tuning["recall"] >= 0.9
    assert manifest.index.search_params == {"nprobe": manifest.tuning["value"]}


def test_an_approximate_build_is_tuned_by_default_unless_asked_not_to(
    tmp_path, tiny_encoder
) -> None:
    path = tmp_path / "c.csv"
    path.write_text("text\n" + "".join(f"note {i} on topic {i % 19}\n" for i in range(1200)))

    def build(name: str, **options):
        return build_index(
            BuildOptions(
                corpus=path,
                name=name,
                out_dir=tmp_path / "idx",
                index="hnsw",
                show_progress=False,
                **options,
            ),
            encoder=tiny_encoder,
        ).manifest()

    tuned = build("tuned")
    assert tuned.tuning["target"] == DEFAULT_TARGET_RECALL
    assert tuned.index.search_params == {"efSearch": tuned.tuning["value"]}
    fixed = build("fixed", target_recall=None)
    assert fixed.tuning is None and fixed.index.search_params == {"efSearch": 64}


@pytest.mark.parametrize("target", [1.5, -0.1])
def test_a_bad_target_recall_is_refused_before_encoding(tmp_path, tiny_encoder, target) -> None:
    path = tmp_path / "c.csv"
    path.write_text("text\nalpha\nbeta\n")
    options = BuildOptions(
        corpus=path,
        name="t",
        out_dir=tmp_path / "idx",
        index="hnsw",
        target_recall=target,
        show_progress=False,
    )
    with pytest.raises(SemsearchError, match="--target-recall must be in"):
        build_index(options, encoder=tiny_encoder)
    assert not (tmp_path / "idx").exists() or not any((tmp_path / "idx").iterdir())


def test_retune_writes_a_new_generation(tmp_path, tiny_encoder) -> None:
    path = _corpus(tmp_path, 1500, "entry {i} about subject {a}")
    folder = build_index(
        BuildOptions(
            corpus=path, name="t", out_dir=tmp_path / "idx", index="hnsw", show_progress=False
        ),
        encoder=tiny_encoder,
    )
    first = folder.manifest()
    result = retune(folder, 0.99, sample=100)
    manifest = folder.manifest()
    assert folder.generations() == [1, 2] and manifest.generation == 2
    assert manifest.index.search_params == {"efSearch": result.value}
    assert manifest.tuning["target"] == 0.99 and manifest.operation["kind"] == "tune"
    assert folder.manifest(1).tuning == first.tuning  # the earlier generation is kept as it was


def test_an_exact_index_is_not_retuned(tmp_path, tiny_encoder) -> None:
    path = _corpus(tmp_path, 50, "line {i}")
    folder = build_index(
        BuildOptions(
            corpus=path, name="t", out_dir=tmp_path / "idx", index="flat", show_progress=False
        ),
        encoder=tiny_encoder,
    )
    with pytest.raises(SemsearchError, match="nothing to tune"):
        retune(folder, 0.9)
    assert folder.generations() == [1]


def test_recall_is_measured_at_the_k_a_tiny_index_can_reach() -> None:
    vectors = _clustered(4)
    index = VectorIndex.create(choose_index("ivf", 4, 16, "cosine"), 16)
    index.train(vectors)
    index.add(vectors, np.arange(4))
    queries = np.arange(4)
    _, exact = _exact(vectors, vectors, 11)
    result = tune_index(index, vectors, exact, target=0.95, k=10, query_ids=queries)
    assert result.met and result.k == 3 and result.recall == 1.0 and result.value == 1


def test_a_single_row_leaves_nothing_to_measure() -> None:
    vectors = _clustered(1)
    index = VectorIndex.create(choose_index("hnsw", 1, 16, "cosine"), 16)
    index.add(vectors, np.arange(1))
    _, exact = _exact(vectors, vectors, 11)
    with pytest.raises(SemsearchError, match="too few rows to measure recall"):
        tune_index(index, vectors, exact, target=0.95, k=10, query_ids=np.arange(1))


def _missed(tried: dict[int, float], parameter: str = "nprobe") -> TuningResult:
    best = max(tried, key=tried.get)
    return TuningResult(parameter, best, tried[best], 0.95, 10, 100, False, tried)


def test_a_missed_target_is_a_warning_that_says_what_to_do(caplog) -> None:
    index = _ivf(_clustered(2000))
    every_list = index.parameter_ceiling()
    result = _missed({1: 0.41, every_list: 0.676})
    with caplog.at_level("WARNING"):
        enforce_target(result, index)
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert "0.676" in line and "0.95" in line and "--index-type" in line and "\n" not in line
    caplog.clear()
    enforce_target(replace(result, met=True), index)
    assert not caplog.records


def test_a_missed_target_under_strict_is_an_error() -> None:
    index = _ivf(_clustered(2000))
    with pytest.raises(SemsearchError, match=r"recall@10 0\.676.*--strict"):
        enforce_target(_missed({1: 0.5, 4: 0.676}), index, strict=True)


def test_hnsw_advice_names_a_larger_ef_search() -> None:
    index = VectorIndex.create(choose_index("hnsw", 300, 16, "cosine"), 16)
    assert "--ef-search" in shortfall(_missed({16: 0.7, 2048: 0.9}, "efSearch"), index)


def test_retune_under_strict_writes_nothing_when_the_target_is_missed(
    tmp_path, tiny_encoder
) -> None:
    path = _corpus(tmp_path, 300, "record {i} in family {a} of kind {b}")
    folder = build_index(
        BuildOptions(
            corpus=path,
            name="pq",
            out_dir=tmp_path / "idx",
            index="IVF4,PQ2x4",
            target_recall=None,
            show_progress=False,
        ),
        encoder=tiny_encoder,
    )
    with pytest.raises(SemsearchError, match="recall target missed"):
        retune(folder, 1.0, sample=50, strict=True)
    assert folder.generations() == [1]
    with pytest.raises(SemsearchError, match="recall target missed"):
        reindex(folder, "IVF2,PQ2x4", target_recall=1.0, strict=True)
    assert folder.generations() == [1]
    assert retune(folder, 1.0, sample=50).met is False  # without strict: a warning
    assert folder.generations() == [1, 2]


def test_build_under_strict_leaves_no_index_when_the_target_is_missed(
    tmp_path, tiny_encoder
) -> None:
    path = _corpus(tmp_path, 300, "record {i} in family {a} of kind {b}")
    options = BuildOptions(
        corpus=path,
        name="pq",
        out_dir=tmp_path / "idx",
        index="IVF4,PQ2x4",
        target_recall=1.0,
        strict=True,
        show_progress=False,
    )
    with pytest.raises(SemsearchError, match="recall target missed"):
        build_index(options, encoder=tiny_encoder)
    assert not any((tmp_path / "idx").iterdir())
