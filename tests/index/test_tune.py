"""Tuning nprobe/efSearch to a recall target against exact search."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.errors import SemsearchError
from semsearch.index.build import DEFAULT_TARGET_RECALL, BuildOptions, build_index
from semsearch.index.factory import choose_index, create_index, prepare_vectors
from semsearch.index.retune import retune_folder
from semsearch.index.tune import (
    exact_search,
    recall_at_k,
    stored_vectors,
    tie_aware_recall,
    tune_index,
)


def _clustered(rows: int = 4000, dimension: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, dimension))
    points = centres[rng.integers(0, 40, rows)] + 0.6 * rng.normal(size=(rows, dimension))
    return prepare_vectors(points, "cosine")


def _ivf(vectors: np.ndarray):
    index = create_index(
        choose_index("ivf", len(vectors), vectors.shape[1], "cosine"), vectors.shape[1]
    )
    index.train(vectors)
    index.add(vectors)
    return index


def test_exact_search_streamed_in_chunks_equals_brute_force() -> None:
    vectors = _clustered(1000)
    queries = vectors[:50]
    scores, streamed = exact_search(
        queries, [vectors[:300], vectors[300:650], vectors[650:]], 5, "cosine"
    )
    similarity = queries @ vectors.T
    brute = np.argsort(-similarity, axis=1)[:, :5]
    assert recall_at_k(streamed, brute, 5) == pytest.approx(1.0)
    assert np.allclose(scores, np.take_along_axis(similarity, brute, axis=1), atol=1e-5)


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


def test_duplicated_vectors_need_no_more_nprobe_when_ties_count() -> None:
    vectors = np.repeat(_clustered(1000), 3, axis=0)  # every vector three times
    index = _ivf(vectors)
    rows = np.arange(0, 3000, 30)
    scores, exact = exact_search(vectors[rows], [vectors], 11, "cosine")
    by_rows = tune_index(index, vectors[rows], exact, target=0.95, k=10, query_rows=rows)
    tie_aware = tune_index(index, vectors[rows], exact, target=0.95, k=10, query_rows=rows,
                           exact_scores=scores)  # fmt: skip
    assert tie_aware.met and tie_aware.value <= by_rows.value
    assert all(tie_aware.tried[v] >= by_rows.tried[v] - 1e-9
               for v in tie_aware.tried.keys() & by_rows.tried.keys())  # fmt: skip


def test_tuning_picks_the_smallest_nprobe_meeting_the_target() -> None:
    vectors = _clustered()
    index = _ivf(vectors)
    rows = np.arange(0, 4000, 20)
    _, exact = exact_search(vectors[rows], [vectors], 11, "cosine")
    result = tune_index(index, vectors[rows], exact, target=0.9, k=10, query_rows=rows)
    assert result.met and result.parameter == "nprobe" and result.recall >= 0.9
    assert result.tried[result.value] >= 0.9
    if result.value > 1:
        assert result.tried[result.value - 1] < 0.9  # the value below was measured and missed
    assert result.value < index.nlist


def _tuned_hnsw(rows: int, target: float):
    """An HNSW index over clustered vectors, tuned on every 20th of them as held-out queries."""
    vectors = _clustered(rows)
    index = create_index(choose_index("hnsw", rows, 16, "cosine"), 16)
    index.add(vectors)
    queries = np.arange(0, rows, 20)
    _, exact = exact_search(vectors[queries], [vectors], 11, "cosine")
    return tune_index(index, vectors[queries], exact, target=target, k=10, query_rows=queries)


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
    flat = create_index(choose_index("flat", 100, 16, "cosine"), 16)
    flat.add(vectors)
    with pytest.raises(SemsearchError, match="nothing to tune"):
        tune_index(flat, vectors[:5], np.zeros((5, 10), dtype=np.int64), 0.9)
    with pytest.raises(SemsearchError, match="target recall"):
        tune_index(flat, vectors[:5], np.zeros((5, 10), dtype=np.int64), 1.5)


def test_compressed_index_cannot_be_retuned_from_its_codes() -> None:
    vectors = _clustered(1_000)
    index = create_index(choose_index("IVF4,PQ4x4", 1_000, 16, "cosine"), 16)
    index.train(vectors)
    index.add(vectors)
    with pytest.raises(SemsearchError, match="--target-recall"):
        stored_vectors(index)


def test_build_with_target_recall_records_the_tuning(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "c.csv"
    path.write_text(
        "text\n" + "".join(f"item {i} of group {i % 23} in set {i % 7}\n" for i in range(1500))
    )
    options = BuildOptions(corpus=path, name="t", out_dir=tmp_path / "idx", index="ivf",
                           target_recall=0.9, show_progress=False)  # fmt: skip
    manifest = build_index(options, encoder=tiny_encoder).manifest()
    assert manifest.tuning["met"] and manifest.tuning["recall"] >= 0.9
    assert manifest.index.search_params == {"nprobe": manifest.tuning["value"]}


def test_an_approximate_build_is_tuned_by_default_unless_asked_not_to(
    tmp_path, tiny_encoder
) -> None:
    path = tmp_path / "c.csv"
    path.write_text("text\n" + "".join(f"note {i} on topic {i % 19}\n" for i in range(1200)))

    def build(name: str, **options):
        return build_index(BuildOptions(corpus=path, name=name, out_dir=tmp_path / "idx",
                                        index="hnsw", show_progress=False, **options),
                           encoder=tiny_encoder).manifest()  # fmt: skip

    tuned = build("tuned")
    assert tuned.tuning["target"] == DEFAULT_TARGET_RECALL
    assert tuned.index.search_params == {"efSearch": tuned.tuning["value"]}
    fixed = build("fixed", target_recall=None)
    assert fixed.tuning is None and fixed.index.search_params == {"efSearch": 64}


@pytest.mark.parametrize("target", [1.5, -0.1])
def test_a_bad_target_recall_is_refused_before_encoding(tmp_path, tiny_encoder, target) -> None:
    path = tmp_path / "c.csv"
    path.write_text("text\nalpha\nbeta\n")
    options = BuildOptions(corpus=path, name="t", out_dir=tmp_path / "idx", index="hnsw",
                           target_recall=target, show_progress=False)  # fmt: skip
    with pytest.raises(SemsearchError, match="--target-recall must be in"):
        build_index(options, encoder=tiny_encoder)
    assert not (tmp_path / "idx").exists() or not any((tmp_path / "idx").iterdir())


def test_retune_rewrites_the_manifest(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "c.csv"
    path.write_text("text\n" + "".join(f"entry {i} about subject {i % 31}\n" for i in range(1500)))
    folder = build_index(BuildOptions(corpus=path, name="t", out_dir=tmp_path / "idx", index="hnsw",
                                      show_progress=False), encoder=tiny_encoder)  # fmt: skip
    result = retune_folder(folder, 0.99, sample=100)
    manifest = folder.manifest()
    assert manifest.index.search_params == {"efSearch": result.value}
    assert manifest.tuning["target"] == 0.99
