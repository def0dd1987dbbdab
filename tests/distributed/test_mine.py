"""`mine --engine ray`: blocks of queries mined by an actor pool give the local miner's pairs."""

from __future__ import annotations

import numpy as np
import pytest
from distributed.conftest import options, ray_tests, write_corpus

from semsearch.distributed import RayOptions, mine_corpus_on_ray, mine_index_on_ray
from semsearch.index.build import build_index
from semsearch.mining import CorpusSource, MiningOptions, MiningResult, mine_corpus, mine_index
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
    on_ray = mine_index_on_ray("docs", tmp_path, mining, RayOptions(workers=2))
    assert "IVF16,Flat (the index's own centroids)" in local.stats.structure
    assert len(local) == 50 and on_ray.stats.structure.startswith(local.stats.structure)
    assert_same_pairs(local, on_ray)
    assert on_ray.pairs_found >= local.pairs_found  # per block: pairs found twice count twice
