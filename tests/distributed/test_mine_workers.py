"""The workers' side of `mine --index --engine ray`, without Ray: actors that open the index
themselves, mining their blocks in this process, give the local miner's pairs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from distributed.conftest import options, write_corpus

from semsearch.distributed import mine as mine_module
from semsearch.distributed.mine import IndexBlockMiner, StoredIndex, train_for_mining
from semsearch.errors import SemsearchError
from semsearch.index.build import build_index
from semsearch.mining import IndexedCollection, MiningOptions, mine_index, mine_paraphrases
from semsearch.mining import neighbours as neighbours_module
from semsearch.mining.blocks import plan_blocks
from semsearch.mining.neighbours import plan_structure


def _search_on_workers(workers: int = 2):
    """A `SearchPairs` that does what `RayIndexPairSearch` does, its actors in this process."""

    def search(collection, options, pairs, timings) -> str:
        index = StoredIndex(str(collection.folder.path), collection.manifest)
        plan = plan_structure(len(pairs.rows), collection.stored.dimension, collection.metric,
                              collection.stored.trained_index(), options.nprobe)  # fmt: skip
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
    build_index(options(corpus, tmp_path, "docs", model=str(tiny_model_dir), index=request.param),
                encoder=tiny_encoder)  # fmt: skip
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
