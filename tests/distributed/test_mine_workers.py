"""The workers' side of `mine --engine ray`, without Ray: actors that open the index
themselves, mining their blocks in this process, give the local miner's pairs; a corpus
mined through a temporary index gives the local corpus miner's, and leaves nothing behind."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed.conftest import options, texts, write_corpus

from semsearch.distributed import mine as mine_module
from semsearch.distributed.mine import (
    IndexBlockMiner,
    StoredIndex,
    mine_corpus_as_index,
    train_for_mining,
)
from semsearch.errors import ResumableError, SemsearchError
from semsearch.ingest.build import build_index
from semsearch.mining import (
    CorpusSource,
    IndexedCollection,
    MiningOptions,
    mine_corpus,
    mine_index,
    mine_paraphrases,
)
from semsearch.mining import neighbours as neighbours_module
from semsearch.mining.blocks import plan_blocks
from semsearch.mining.neighbours import plan_structure


def _search_on_workers(workers: int = 2):
    """A `SearchPairs` that does what `RayIndexPairSearch` does, its actors in this process."""

    def search(collection, options, pairs) -> str:
        index = StoredIndex(str(collection.folder.path), collection.manifest)
        plan = plan_structure(
            len(pairs.rows),
            collection.stored.dimension,
            collection.metric,
            collection.stored.trained_index(),
            options.nprobe,
        )
        trained = [train_for_mining(index, pairs.rows, plan)] if plan.kind == "train" else None
        job = mine_module._block_job(pairs, options)
        blocks = plan_blocks(len(pairs.rows), options.query_chunk, workers)
        actors = [IndexBlockMiner(index, plan, trained, job) for _ in range(workers)]
        found = 0
        for number, block in enumerate(blocks):
            batch = actors[number % workers]({"start": [block.start], "stop": [block.stop]})
            real = batch["key"] >= 0
            pairs.add_candidates(batch["key"][real], batch["score"][real])
            found += int(batch["found"].sum())
        if options.top is not None:
            pairs.found_in_blocks = found
        return f"{plan.about} ({len(blocks)} blocks)"

    return search


def _assert_same_pairs(local, on_workers) -> None:
    assert on_workers.to_table().equals(local.to_table())  # ids, texts and scores, in order
    assert on_workers.stats.structure.startswith(local.stats.structure)


@pytest.fixture()
def built(tmp_path, tiny_model_dir, tiny_encoder, request):
    corpus = write_corpus(tmp_path / "corpus.parquet", 600)
    build_index(
        options(corpus, tmp_path, "docs", model=str(tiny_model_dir), index=request.param),
        encoder=tiny_encoder,
    )
    return tmp_path


@pytest.mark.parametrize(
    ("built", "about"),
    [("IVF8,Flat", "IVF8,Flat (the index's own centroids)"), ("flat", "(trained for mining)")],
    indirect=["built"],
)
def test_workers_that_open_the_index_find_the_local_pairs(built, about, monkeypatch) -> None:
    monkeypatch.setattr(neighbours_module, "AUTO_EXACT_LIMIT", 100)  # an IVF structure
    monkeypatch.setattr(mine_module, "require_ray", lambda: SimpleNamespace(get=lambda ref: ref))
    mining = MiningOptions(top_k=4, top=80, threshold=0.3, query_chunk=32)
    local = mine_index("docs", built, mining)
    on_workers = mine_paraphrases(IndexedCollection("docs", built), mining, _search_on_workers())
    assert about in local.stats.structure and len(local) == 80
    _assert_same_pairs(local, on_workers)


@pytest.mark.parametrize("built", ["flat"], indirect=True)
def test_three_workers_find_the_local_exact_pairs(built) -> None:
    mining = MiningOptions(top_k=5, query_chunk=50, exact_duplicates="drop")
    local = mine_index("docs", built, mining)
    on_workers = mine_paraphrases(IndexedCollection("docs", built), mining, _search_on_workers(3))
    assert local.stats.structure.startswith("Flat (exact")
    _assert_same_pairs(local, on_workers)
    assert on_workers.pairs_found == local.pairs_found


@pytest.mark.parametrize("built", ["flat"], indirect=True)
def test_a_worker_that_cannot_see_the_index_folder_says_so(built, tmp_path) -> None:
    collection = IndexedCollection("docs", built)
    with pytest.raises(SemsearchError, match="cannot see the index folder .* every node mounts"):
        StoredIndex(str(tmp_path / "elsewhere" / "docs"), collection.manifest).open()
    stored = StoredIndex(str(collection.folder.path), collection.manifest).open()
    rows = np.array([0, 5, 9])
    np.testing.assert_array_equal(stored.take(rows), collection.vectors(rows))


def write_copies(path):
    """`texts` with some repeated, a blank, a null and a text of spaces (those are skipped)."""
    rows = texts(150, seed=3) + texts(150, seed=3)[:20:3] + ["   ", None]
    table = pa.table({"doc_id": [f"k{i:03d}" for i in range(len(rows))], "text": rows})
    pq.write_table(table.take(np.random.default_rng(1).permutation(len(rows))), path)
    return path


@pytest.mark.parametrize(
    ("id_column", "duplicates"), [("doc_id", "separate"), (None, "drop"), ("doc_id", "keep")]
)
def test_a_corpus_mined_through_a_temporary_index_is_the_local_corpus_mining(
    tmp_path, tiny_model_dir, tiny_encoder, id_column, duplicates
) -> None:
    corpus = write_copies(tmp_path / "copies.parquet")
    source = CorpusSource(corpus, id_column=id_column, model=str(tiny_model_dir), device="cpu")
    mining = MiningOptions(top_k=4, query_chunk=32, exact_duplicates=duplicates)
    local = mine_corpus(source, mining, encoder=tiny_encoder)
    work = tmp_path / "work"
    through = mine_corpus_as_index(
        source, mining, work, lambda built: build_index(built, tiny_encoder), _search_on_workers()
    )
    ours, theirs = local.to_table(), through.to_table()
    for column in ("id_a", "id_b", "text_a", "text_b"):  # the same pairs, in the same order
        assert theirs.column(column).equals(ours.column(column)), column
    np.testing.assert_allclose(  # each row encoded apart, not each distinct text once
        theirs.column("score").to_numpy(), ours.column("score").to_numpy(), atol=1e-6
    )
    assert through.pairs_found == local.pairs_found
    assert through.stats.structure.startswith(local.stats.structure)
    assert through.collection.name == local.collection.name == "copies.parquet"
    assert through.collection.ids.type == local.collection.ids.type
    for field in ("rows", "rows_skipped", "searched_rows", "exact_duplicate_rows", "top_k"):
        assert getattr(through.stats, field) == getattr(local.stats, field), field
    assert local.stats.rows_skipped == 5 and local.stats.exact_duplicate_rows > 0
    if duplicates == "separate":
        assert through.duplicates.table.equals(local.duplicates.table)
    assert list(work.iterdir()) == []  # the temporary index is gone


def test_a_failed_build_or_search_leaves_no_temporary_index(tmp_path, tiny_model_dir) -> None:
    corpus = write_copies(tmp_path / "copies.parquet")
    source = CorpusSource(corpus, model=str(tiny_model_dir), device="cpu")
    work, seen = tmp_path / "work", []

    def lost(built) -> None:
        seen.append(built.out_dir)
        (built.out_dir / ".corpus.partial").mkdir()  # what a build leaves to resume from
        raise ResumableError(
            "the Ray job wrote 1 of 2 parts", "run the same command again to encode the rest"
        )

    with pytest.raises(SemsearchError) as raised:
        mine_corpus_as_index(source, None, work, lost, _search_on_workers())
    assert str(raised.value) == (
        "the Ray job wrote 1 of 2 parts: run the mining again (on a "
        "cluster, with a --work-dir every node mounts)"
    )
    assert seen[0].parent == work and list(work.iterdir()) == []

    def broken(*args) -> str:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        mine_corpus_as_index(source, None, work, build_index, broken)
    assert list(work.iterdir()) == []


def test_a_work_dir_that_cannot_hold_the_temporary_index_is_one_line(tmp_path) -> None:
    source = CorpusSource(write_copies(tmp_path / "copies.parquet"))
    (tmp_path / "file").write_text("x")

    def never(*args) -> None:
        raise AssertionError("nothing is built")

    for work_dir, expected in [
        ("s3://bucket/work", "--work-dir s3://bucket/work is a URI"),
        (tmp_path / "file", f"cannot make a temporary index in --work-dir {tmp_path / 'file'}"),
    ]:
        with pytest.raises(SemsearchError, match=expected):
            mine_corpus_as_index(source, None, work_dir, never, never)
    with pytest.raises(SemsearchError, match="--top-k must be at least 1"):
        mine_corpus_as_index(source, MiningOptions(top_k=0), tmp_path / "w", never, never)
    assert not (tmp_path / "w").exists()
