"""`mine --engine ray`: blocks of queries mined by an actor pool give the local miner's pairs;
the actors read the stored vectors themselves (of the index, or of the temporary index a
corpus is built into) and the driver never does, nor encodes."""

from __future__ import annotations

import tempfile
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line, runner
from distributed.conftest import options, ray_tests, segments, write_corpus

from semsearch.cli.app import app
from semsearch.distributed import (
    RayOptions,
    build_index_on_ray,
    mine_corpus_on_ray,
    mine_index_on_ray,
)
from semsearch.distributed import mine as mine_module
from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.mining import (
    CorpusSource,
    IndexedCollection,
    MiningOptions,
    MiningResult,
    mine_corpus,
    mine_index,
)
from semsearch.mining import collection as collection_module
from semsearch.mining import neighbours as neighbours_module
from semsearch.models.bi_encoder import BiEncoder

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


def test_mining_a_corpus_on_ray_finds_the_local_pairs_without_the_vectors_on_the_driver(
    tmp_path, tiny_model_dir, tiny_encoder, monkeypatch
) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 300)  # 6 blank texts are skipped
    source = CorpusSource(corpus, id_column="doc_id", model=str(tiny_model_dir), device="cpu")
    mining = MiningOptions(top_k=5, query_chunk=16, exact_duplicates="drop")
    local = mine_corpus(source, mining, encoder=tiny_encoder)
    # Parts of 64 rows: a segment per worker. The workers encode on torch, as `tiny_encoder`
    # does here (`runtime="auto"`, both sides' default, is OpenVINO on their CPUs).
    build_options = mine_module._build_options
    monkeypatch.setattr(
        mine_module,
        "_build_options",
        lambda *args: replace(build_options(*args), part_rows=64, runtime="torch"),
    )
    segment_counts = _segments_mined(monkeypatch)
    puts = _driver_never_reads_vectors(monkeypatch)
    work = tmp_path / "work"
    on_ray = mine_corpus_on_ray(source, mining, RayOptions(workers=2), work)
    _assert_same_pairs_but_ties(local, on_ray, atol=1e-5)  # each row encoded apart, on a worker
    assert on_ray.pairs_found == local.pairs_found
    assert on_ray.stats.rows_skipped == local.stats.rows_skipped == 6
    assert on_ray.collection.name == "corpus.parquet"
    assert on_ray.stats.structure.startswith("Flat (exact), on Ray (2 CPU actors")
    assert segment_counts == [2]
    # no data: the old driver put the vectors whole (an array, and a serialized Flat index)
    assert _data_sized(puts) == []
    assert list(work.iterdir()) == []  # the temporary index is gone


def _assert_same_pairs_but_ties(ours: MiningResult, theirs: MiningResult, atol: float) -> None:
    """The same pairs (ids and texts) with the same scores to `atol`, in the same order but
    where two scores tie to `atol` (float noise may swap those)."""
    local, on_ray = ours.to_table(), theirs.to_table()
    columns = ("id_a", "id_b", "text_a", "text_b")
    local_pairs = list(zip(*(local.column(column).to_pylist() for column in columns)))
    ray_pairs = list(zip(*(on_ray.column(column).to_pylist() for column in columns)))
    assert sorted(ray_pairs) == sorted(local_pairs)
    local_scores = dict(zip(local_pairs, local.column("score").to_numpy()))
    ray_scores = on_ray.column("score").to_numpy()
    np.testing.assert_allclose(ray_scores, [local_scores[pair] for pair in ray_pairs], atol=atol)
    np.testing.assert_allclose(ray_scores, local.column("score").to_numpy(), atol=atol)  # order
    assert theirs.stats.rows == ours.stats.rows
    assert theirs.stats.searched_rows == ours.stats.searched_rows


def _segments_mined(monkeypatch) -> list[int]:
    """The segment count of each temporary index mined from here on."""
    counts: list[int] = []
    opened = mine_module.IndexedCollection

    def opening(*args) -> IndexedCollection:
        collection = opened(*args)
        counts.append(len(collection.manifest.segments))
        return collection

    monkeypatch.setattr(mine_module, "IndexedCollection", opening)
    return counts


def test_mining_a_corpus_on_ray_that_fails_leaves_nothing_behind(
    tmp_path, tiny_model_dir, monkeypatch
) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 100)
    source = CorpusSource(corpus, id_column="doc_id", model=str(tiny_model_dir), device="cpu")
    work = tmp_path / "work"

    def lost(*args) -> str:
        assert len(list(work.glob("*/corpus/segments/*/part-*[0-9].npy"))) == 1  # built, then mined
        raise SemsearchError("the Ray job failed while mining (NodeDiedError): run it again")

    monkeypatch.setattr(mine_module.RayIndexPairSearch, "__call__", lost)
    with pytest.raises(SemsearchError, match="while mining"):
        mine_corpus_on_ray(source, MiningOptions(), RayOptions(workers=1), work)
    assert list(work.iterdir()) == []

    import ray  # a cluster of two nodes, and no --work-dir: this machine's /tmp is not theirs

    node = {"Alive": True, "Resources": {"CPU": 2.0}}
    monkeypatch.setattr(ray, "nodes", lambda: [node, node])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    with pytest.raises(SemsearchError, match="has 2 nodes, .* give --work-dir, a folder every"):
        mine_corpus_on_ray(source, MiningOptions(), RayOptions(workers=1))
    assert list((tmp_path / "tmp").iterdir()) == []


def test_bad_input_to_mine_a_corpus_on_ray_is_the_local_line(tmp_path, tiny_model_dir) -> None:
    corpus = tmp_path / "repeats.parquet"
    pq.write_table(pa.table({"doc_id": ["a", "b", "a"], "text": ["one", "two", "three"]}), corpus)
    work = tmp_path / "work"

    def mine(*args: str) -> str:
        return error_line(
            runner.invoke(
                app,
                [
                    "-q",
                    "mine",
                    str(corpus),
                    "--model",
                    str(tiny_model_dir),
                    "--device",
                    "cpu",
                    *args,
                ],
                catch_exceptions=False,
            )
        )

    local = mine("--id-column", "doc_id")
    on_ray = mine("--id-column", "doc_id", "--engine", "ray", "--work-dir", str(work))
    assert local.startswith("error: id 'a' appears more than once in 'doc_id'")
    assert on_ray.startswith("error: id 'a' appears more than once in 'doc_id'")  # on a worker
    assert list(work.iterdir()) == []
    line = mine("--engine", "ray", "--work-dir", "s3://bucket/work")
    assert "--work-dir s3://bucket/work is a URI, but an index folder must be a local path" in line


def test_mining_an_ivf_index_on_ray_with_a_cut_finds_the_local_pairs(
    tmp_path, tiny_model_dir, tiny_encoder, monkeypatch
) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 1200)
    build_index(
        options(corpus, tmp_path, "docs", model=str(tiny_model_dir), index="IVF16,Flat"),
        encoder=tiny_encoder,
    )
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
        raise AssertionError("the driver read stored vectors or encoded texts")

    monkeypatch.setattr(collection_module.StoredVectors, "take", refuse)
    monkeypatch.setattr(collection_module.IndexedCollection, "vectors", refuse)
    monkeypatch.setattr(collection_module.EncodedCollection, "vectors", refuse)
    monkeypatch.setattr(BiEncoder, "encode", refuse)
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
    build_index(
        options(corpus, tmp_path, "docs", model=str(tiny_model_dir), index="flat"),
        encoder=tiny_encoder,
    )
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
