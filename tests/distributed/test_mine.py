"""`mine --engine ray`: blocks of queries mined by an actor pool give the local miner's pairs;
with --index the actors read the stored vectors themselves and the driver never does."""

from __future__ import annotations

import numpy as np
import pytest
from distributed.conftest import options, ray_tests, segments, write_corpus

from semsearch.distributed import (
    RayOptions,
    build_index_on_ray,
    mine_corpus_on_ray,
    mine_index_on_ray,
)
from semsearch.index.build import build_index
from semsearch.mining import CorpusSource, MiningOptions, MiningResult, mine_corpus, mine_index
from semsearch.mining import collection as collection_module
from semsearch.mining import neighbours as neighbours_module

pytestmark = [*ray_tests, pytest.mark.usefixtures("local_ray")]


def assert_same_pairs(ours: MiningResult, theirs: MiningResult, atol: float = 0.0) -> None:
    local, on_ray = ours.to_table(), theirs.to_table()
    for column in ("id_a", "id_b", "text_a", "text_b"):
        assert on_ray.column(column).to_pylist() == local.column(column).to_pylist(), column
    np.testing.assert_allclose(
        on_ray.column("score").to_numpy(), local.column("score").to_numpy(), atol=atol
    )
    assert (
        theirs.stats.rows == ours.stats.rows
        and theirs.stats.searched_rows == ours.stats.searched_rows
    )


def test_mining_a_corpus_on_ray_finds_the_local_pairs(
    tmp_path, tiny_model_dir, tiny_encoder
) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 120)  # a few texts repeat (blanks skipped)
    source = CorpusSource(corpus, id_column="doc_id", model=str(tiny_model_dir), device="cpu")
    mining = MiningOptions(top_k=5, query_chunk=16, exact_duplicates="drop")
    local = mine_corpus(source, mining, encoder=tiny_encoder)
    on_ray = mine_corpus_on_ray(source, mining, RayOptions(workers=2))
    assert_same_pairs(local, on_ray, atol=1e-5)
    assert on_ray.pairs_found == local.pairs_found
    assert "on Ray (2 CPU actors" in on_ray.stats.structure


def test_mining_an_ivf_index_on_ray_with_a_cut_finds_the_local_pairs(tmp_path, tiny_model_dir,
                                                                     tiny_encoder, monkeypatch) -> None:  # fmt: skip
    corpus = write_corpus(tmp_path / "corpus.parquet", 1200)
    build_index(options(corpus, tmp_path, "docs", model=str(tiny_model_dir), index="IVF16,Flat"),
                encoder=tiny_encoder)  # fmt: skip
    monkeypatch.setattr(neighbours_module, "AUTO_EXACT_LIMIT", 100)  # search with the index's IVF
    mining = MiningOptions(top_k=4, top=50, threshold=0.5, query_chunk=64)
    local = mine_index("docs", tmp_path, mining)
    puts = _driver_never_reads_vectors(monkeypatch)
    on_ray = mine_index_on_ray("docs", tmp_path, mining, RayOptions(workers=2))
    assert _data_sized(puts) == []  # the workers read the index's own centroids too
    assert "IVF16,Flat (the index's own centroids)" in local.stats.structure
    assert len(local) == 50 and on_ray.stats.structure.startswith(local.stats.structure)
    assert_same_pairs(local, on_ray)
    assert on_ray.pairs_found >= local.pairs_found  # per block: pairs found twice count twice


def _data_sized(puts: list[int]) -> list[int]:
    """The puts bigger than Ray Data's own bookkeeping (its blocks of a few block bounds are
    a few bytes each): what could carry vectors or a structure."""
    return [size for size in puts if size > 1024]


def _driver_never_reads_vectors(monkeypatch) -> list[int]:
    """Reading stored vectors in this process (the driver) fails from here on; the sizes of
    what the driver puts into the object store are recorded in the list returned."""
    import ray

    def refuse(*args, **kwargs):
        raise AssertionError("the driver read stored vectors")

    monkeypatch.setattr(collection_module.StoredVectors, "take", refuse)
    monkeypatch.setattr(collection_module.IndexedCollection, "vectors", refuse)
    puts: list[int] = []
    put = ray.put

    def recording_put(value, *args, **kwargs):
        puts.append(len(value) if isinstance(value, bytes) else getattr(value, "nbytes", -1))
        return put(value, *args, **kwargs)

    monkeypatch.setattr(ray, "put", recording_put)
    return puts


def test_a_structure_trained_for_mining_on_one_worker_finds_the_local_pairs(
    tmp_path, tiny_model_dir, tiny_encoder, monkeypatch
) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 1200)
    build_index(options(corpus, tmp_path, "docs", model=str(tiny_model_dir), index="flat"),
                encoder=tiny_encoder)  # fmt: skip
    monkeypatch.setattr(neighbours_module, "AUTO_EXACT_LIMIT", 100)  # train an IVF for mining
    mining = MiningOptions(top_k=5, query_chunk=128)
    local = mine_index("docs", tmp_path, mining)
    rows, dimension = local.stats.rows, tiny_encoder.dimension
    puts = _driver_never_reads_vectors(monkeypatch)
    on_ray = mine_index_on_ray("docs", tmp_path, mining, RayOptions(workers=2))
    assert "(trained for mining)" in local.stats.structure
    assert on_ray.stats.structure.startswith(local.stats.structure)
    assert_same_pairs(local, on_ray)
    assert on_ray.pairs_found == local.pairs_found
    # one put: the trained centroids, a small share of the vectors the driver never held
    trained = _data_sized(puts)
    assert len(trained) == 1 and trained[0] < rows * dimension * 4 // 4


def test_mining_an_index_built_on_ray_reads_its_segments_on_the_workers(
    tmp_path, tiny_model_dir, tiny_encoder, monkeypatch
) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 300)
    built = build_index_on_ray(
        options(corpus, tmp_path, "docs", model=str(tiny_model_dir), part_rows=64, index="flat"),
        RayOptions(workers=2),
    )
    assert len(segments(built)) == 2
    mining = MiningOptions(top_k=3, query_chunk=32, exact_duplicates="drop")
    local = mine_index("docs", tmp_path, mining)
    _driver_never_reads_vectors(monkeypatch)
    on_ray = mine_index_on_ray("docs", tmp_path, mining, RayOptions(workers=2))
    assert_same_pairs(local, on_ray)
    assert on_ray.pairs_found == local.pairs_found
