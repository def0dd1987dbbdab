"""Choosing FAISS structures, and the per-call search parameters of the index they become."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.ann.exact import exact_knn
from semsearch.ann.factory import (
    AUTO_EXACT_LIMIT,
    IndexSpec,
    choose_index,
    estimate_bytes,
    ivf_list_count,
    minimum_rows,
    parse_bytes,
)
from semsearch.ann.vector_index import IdFilter, VectorIndex, ivf_parameters, prepare_vectors
from semsearch.errors import SemsearchError


def test_auto_is_exact_for_small_corpora_and_ivf_above() -> None:
    assert choose_index("auto", AUTO_EXACT_LIMIT, 384, "cosine").factory == "Flat"
    large = choose_index("auto", 841_708, 384, "cosine")
    assert large.factory == "IVF4096,SQfp16" and large.search_params["nprobe"] >= 1
    # Manhattan distances need the full vectors: IVF-Flat there.
    assert choose_index("auto", 841_708, 384, "manhattan").factory == "IVF4096,Flat"
    assert choose_index("ivfsq", 841_708, 384, "l2").factory == "IVF4096,SQfp16"


def test_named_types() -> None:
    assert choose_index("hnsw", 1000, 384, "l2").search_params == {"efSearch": 64}
    # ivfpq is the disk structure: PQ codes refined from the stored vectors
    ivfpq = choose_index("ivfpq", 100_000, 384, "dot")
    disk = choose_index("disk", 100_000, 384, "dot")
    assert (ivfpq.factory, ivfpq.search_params) == (disk.factory, disk.search_params)
    assert ivfpq.requested == "ivfpq" and ivfpq.factory.endswith("PQ48x8np")


def test_factory_string_passes_through() -> None:
    spec = choose_index("IVF64,Flat", 10_000, 32, "cosine")
    assert spec.factory == "IVF64,Flat" and "nprobe" in spec.search_params


def test_unknown_type_and_metric_are_user_errors() -> None:
    with pytest.raises(SemsearchError, match="unknown index type"):
        choose_index("annoy", 10, 32, "cosine")
    with pytest.raises(SemsearchError, match="unknown metric"):
        choose_index("flat", 10, 32, "hamming")


def test_invalid_factory_string_is_a_user_error() -> None:
    spec = choose_index("IVF16,Nonsense", 1000, 32, "cosine")
    with pytest.raises(SemsearchError, match="FAISS cannot build"):
        VectorIndex.create(spec, 32)


def test_list_count_leaves_enough_training_points() -> None:
    assert ivf_list_count(10) == 1
    for rows in (1_000, 100_000, 841_708):
        assert rows // ivf_list_count(rows) >= 39


def test_disk_index_takes_about_sqrt_rows_lists() -> None:
    # 20M rows: 4,096 lists (sqrt 4,472) for disk, where in-RAM IVF takes 16,384
    assert choose_index("disk", 20_000_000, 384, "cosine").factory == "IVF4096,PQ48x8np"
    assert choose_index("ivfsq", 20_000_000, 384, "cosine").factory == "IVF16384,SQfp16"


def test_pq_codebooks_have_as_many_centroids_as_the_rows_can_train(capfd) -> None:
    """The demo corpus (3,198 rows) cannot train 256 centroids per codebook (9,984 rows):
    FAISS printed one warning per sub-quantizer, 48 lines, where 6-bit codes train quietly."""
    assert choose_index("disk", 3_198, 384, "cosine").factory == "IVF64,PQ48x6np"
    assert choose_index("ivfpq", 9_983, 384, "cosine").factory.endswith("PQ48x7np")
    assert choose_index("disk", 9_984, 384, "cosine").factory.endswith("PQ48x8np")
    assert choose_index("ivfpq", 255, 384, "cosine").factory == "Flat"  # no codebook fits
    spec = choose_index("disk", 3_198, 384, "cosine")
    vectors = prepare_vectors(np.random.default_rng(0).normal(size=(3_198, 384)), "cosine")
    index = VectorIndex.create(spec, 384)
    capfd.readouterr()
    index.train(vectors)
    index.add(vectors, np.arange(3_198))
    assert "please provide at least" not in capfd.readouterr().err
    assert estimate_bytes("IVF64,PQ48x6", 3_198, 384) == 3_198 * (36 + 8) + (64 + 64) * 4 * 384


def test_search_params_travel_with_each_call_and_are_checked() -> None:
    import faiss

    vectors = prepare_vectors(np.random.default_rng(0).normal(size=(5_000, 8)), "l2")
    index = VectorIndex.create(choose_index("ivf", 5_000, 8, "l2"), 8)
    index.train(vectors)
    index.add(vectors, np.arange(5_000))
    queries = vectors[:20]
    nlist = index.parameter_ceiling()
    default_nprobe = faiss.extract_index_ivf(index.faiss).nprobe
    _, probed = index.search(queries, 5, {"nprobe": 7})
    assert probed.shape == (20, 5) and np.all(probed >= 0)
    # Probing every list is exact search; the index itself is never changed by a call.
    _, everything = index.search(queries, 5, {"nprobe": nlist})
    _, exact = exact_knn(queries, [(np.arange(5_000), vectors)], 5, "l2")
    assert everything.tolist() == exact.tolist()
    assert faiss.extract_index_ivf(index.faiss).nprobe == default_nprobe
    with pytest.raises(SemsearchError, match="efSearch"):
        index.search(queries, 5, {"efSearch": 10})
    with pytest.raises(SemsearchError, match="at least 1"):
        index.search(queries, 5, {"nprobe": 0})
    flat = VectorIndex.create(choose_index("flat", 5_000, 8, "l2"), 8)
    flat.add(vectors, np.arange(5_000))
    with pytest.raises(SemsearchError, match="nprobe"):
        flat.search(queries, 5, {"nprobe": 7})


@pytest.mark.parametrize("with_filter", [False, True])
def test_a_call_without_nprobe_probes_as_many_lists_as_the_index_does(with_filter) -> None:
    import faiss

    vectors = prepare_vectors(np.random.default_rng(1).normal(size=(3_000, 8)), "cosine")
    index = VectorIndex.create(IndexSpec("ivf", "IVF16,Flat", "cosine"), 8)
    index.train(vectors)
    index.add(vectors, np.arange(3_000))
    faiss.extract_index_ivf(index.faiss).nprobe = 16  # the index's own: every list
    allowed = IdFilter.of(np.arange(0, 3_000, 2), 3_000) if with_filter else None
    _, found = index.search(vectors[:30], 5, None, allowed)
    kept = np.arange(0, 3_000, 2) if with_filter else np.arange(3_000)
    _, exact = exact_knn(vectors[:30], [(kept, vectors[kept])], 5, "cosine")
    assert found.tolist() == exact.tolist()  # not one list, as a bare SearchParametersIVF()


def test_ivf_parameters_are_built_in_one_place_that_requires_nprobe() -> None:
    from pathlib import Path

    import semsearch

    package = Path(semsearch.__file__).parent
    builders = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if "SearchParametersIVF(" in path.read_text()
    ]
    assert builders == ["ann/vector_index.py"]
    assert ivf_parameters(9).nprobe == 9


def test_memory_budget_steers_auto_towards_smaller_structures() -> None:
    rows, dimension = 841_708, 384
    assert choose_index(
        "auto", rows, dimension, "cosine", memory_budget=4 * 2**30
    ).factory.endswith(",SQfp16")
    squeezed = choose_index("auto", rows, dimension, "cosine", memory_budget=300 * 2**20)
    assert ",PQ" in squeezed.factory
    with pytest.raises(SemsearchError, match="memory budget"):
        choose_index("auto", rows, dimension, "cosine", memory_budget=4 * 2**20)
    with pytest.raises(SemsearchError, match="memory budget"):
        choose_index("hnsw", rows, dimension, "cosine", memory_budget=1 * 2**30)


def test_estimates_match_what_faiss_builds() -> None:
    import faiss

    rows, dimension = 20_000, 32
    vectors = np.random.default_rng(0).normal(size=(rows, dimension)).astype("float32")
    for kind in ("flat", "ivf", "ivfsq", "hnsw"):
        spec = choose_index(kind, rows, dimension, "l2")
        index = VectorIndex.create(spec, dimension)
        index.train(vectors)
        index.add(vectors, np.arange(rows))
        actual = len(faiss.serialize_index(index.faiss))
        assert 0.7 < estimate_bytes(spec.factory, rows, dimension) / actual < 1.4, kind


def test_sizes_parse() -> None:
    assert parse_bytes("4G") == 4 * 2**30 and parse_bytes("512MiB") == 512 * 2**20
    with pytest.raises(SemsearchError, match="size"):
        parse_bytes("lots")


def test_minimum_rows_counts_ivf_lists_and_pq_codebooks() -> None:
    assert minimum_rows("Flat") == minimum_rows("HNSW32,Flat") == 1
    assert minimum_rows("IVF1024,Flat") == 1024
    assert minimum_rows("IVF8,PQ48x8") == minimum_rows("OPQ16,IVF4,PQ16") == 256
    assert minimum_rows("PQ16x4") == 16
    assert minimum_rows("NSG32,Flat") == 101 and minimum_rows("PCA8,Flat") == 8


@pytest.mark.parametrize("requested", ["ivfpq", "IVF1024,Flat", "IVF64,PQ8x8"])
def test_a_type_that_cannot_train_on_so_few_rows_falls_back_to_flat(requested, caplog) -> None:
    spec = choose_index(requested, 200, 384, "cosine")
    assert (spec.requested, spec.factory, spec.search_params) == (requested, "Flat", {})
    assert "building a flat index (exact search) instead" in caplog.text
    assert choose_index(requested, 5000, 384, "cosine").factory != "Flat"


def test_tiny_ivf_and_hnsw_are_kept_they_can_train_on_any_count() -> None:
    assert choose_index("ivf", 4, 384, "cosine").factory == "IVF1,Flat"
    assert choose_index("hnsw", 1, 384, "cosine").factory.startswith("HNSW")


def test_factory_strings_semsearch_cannot_use_are_refused_up_front() -> None:
    with pytest.raises(SemsearchError, match="drop the IDMap prefix"):
        choose_index("IDMap,Flat", 1000, 32, "cosine")
    with pytest.raises(SemsearchError, match="at least 1 list"):
        choose_index("IVF0,Flat", 1000, 32, "cosine")
    assert choose_index("NSG32,Flat", 40, 32, "cosine").factory == "Flat"


@pytest.mark.parametrize("text", ["...", "1..2G", "1e9", "G", ""])
def test_sizes_that_are_not_sizes_are_one_error(text) -> None:
    with pytest.raises(SemsearchError, match="cannot read"):
        parse_bytes(text)


@pytest.mark.parametrize("requested", ["ivfpq", "IVF4,SQ8", "HNSW8,SQ8", "IVF4_HNSW8,Flat"])
def test_manhattan_is_refused_where_faiss_cannot_compute_it(requested) -> None:
    # HNSW8,SQ8 would abort the whole process from a FAISS worker thread.
    with pytest.raises(SemsearchError, match="cannot compute the manhattan metric"):
        choose_index(requested, 5000, 32, "manhattan")


def test_manhattan_auto_never_picks_codes() -> None:
    for rows in (10, 500_000):
        spec = choose_index("auto", rows, 32, "manhattan", memory_budget=2**40)
        assert "PQ" not in spec.factory
    assert choose_index("hnsw", 5000, 32, "manhattan").factory == "HNSW32,Flat"
