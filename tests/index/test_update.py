"""`add` (upsert by id) and `delete`: new generations whose results equal a fresh build."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from index.living_support import build, generated_table, wide_search_params, write

from semsearch.errors import SemsearchError
from semsearch.index.living import Index
from semsearch.search import Searcher

QUERIES = ["guitar cat", "linux archive number 7", "rocket planet", "cake recipe", "json parser"]


def _ids(searcher: Searcher, k: int = 10, **options) -> list[list]:
    return [[hit.id for hit in hits] for hits in searcher.search(QUERIES, k=k, **options)]


def _scores(searcher: Searcher, k: int = 10, **options) -> np.ndarray:
    return np.array(
        [[hit.score for hit in hits] for hits in searcher.search(QUERIES, k=k, **options)]
    )


@pytest.mark.parametrize("index_type", ["flat", "IVF4,Flat", "hnsw"])
def test_add_equals_a_fresh_build(tmp_path, tiny_encoder, index_type) -> None:
    first, second = generated_table(200), generated_table(100, start=200)
    grown = Index(build(write(first, tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder,
                        index_type, target_recall=None))  # fmt: skip
    result = grown.add(second, encoder=tiny_encoder)
    assert (result.added, result.replaced, result.generation) == (100, 0, 2)
    whole = pa.concat_tables([first, second])
    fresh = build(write(whole, tmp_path / "all.parquet"), tmp_path / "idx", tiny_encoder,
                  index_type, name="fresh", target_recall=None)  # fmt: skip
    ours, theirs = Searcher(grown.folder, tiny_encoder), Searcher(fresh, tiny_encoder)
    # Every list / a wide beam: both indexes then answer exactly, so any row the add lost or
    # misplaced would change the scores.
    exhaustive = wide_search_params(index_type, nprobe=4, ef_search=300)
    np.testing.assert_allclose(
        _scores(ours, **exhaustive), _scores(theirs, **exhaustive), atol=1e-5
    )
    if index_type == "flat":
        assert _ids(ours) == _ids(theirs)


def test_adding_the_same_file_again_encodes_nothing(tmp_path, tiny_encoder) -> None:
    table = generated_table(30)
    index = Index(build(write(table, tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder))
    calls = []
    original = tiny_encoder.encode
    tiny_encoder.encode = lambda texts, **kw: calls.append(len(texts)) or original(texts, **kw)
    try:
        result = index.add(table, encoder=tiny_encoder)
    finally:
        tiny_encoder.encode = original
    assert result.generation is None and result.unchanged == 30 and calls == []
    assert index.manifest.generation == 1


def test_a_changed_text_replaces_its_row(tmp_path, tiny_encoder) -> None:
    table = generated_table(30)
    index = Index(build(write(table, tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder))
    changed = table.slice(5, 1).set_column(1, "text", pa.array(["a brand new text about violins"]))
    result = index.add(changed, encoder=tiny_encoder)
    assert (result.replaced, result.added) == (1, 0)
    searcher = index.searcher(encoder=tiny_encoder)
    assert searcher.manifest.rows == 30
    hits = searcher.search(["a brand new text about violins"], k=30)[0]
    assert [hit.id for hit in hits].count("d5") == 1 and hits[0].id == "d5"
    assert hits[0].text == "a brand new text about violins" and hits[0].score == pytest.approx(
        1, abs=1e-5
    )


def test_deleted_ids_never_come_back_and_flat_equals_a_build_without_them(
    tmp_path, tiny_encoder
) -> None:
    table = generated_table(120)
    index = Index(build(write(table, tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder))
    gone = [f"d{i}" for i in range(0, 120, 3)]
    result = index.delete(ids=gone + ["not-there"])
    assert (result.deleted, result.not_found) == (40, 1)
    searcher = index.searcher(encoder=tiny_encoder)
    found = {hit for hits in _ids(searcher, k=120) for hit in hits}
    assert not found & set(gone) and len(found) == 80
    kept = table.filter(pa.array([i % 3 != 0 for i in range(120)]))
    fresh = build(
        write(kept, tmp_path / "kept.parquet"), tmp_path / "idx", tiny_encoder, name="kept"
    )
    assert _ids(searcher) == _ids(Searcher(fresh, tiny_encoder))


def test_delete_where_and_bad_requests(tmp_path, tiny_encoder) -> None:
    index = Index(
        build(write(generated_table(60), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder)
    )
    assert index.delete(where="license = 'MIT'").deleted == 6
    searcher = index.searcher(encoder=tiny_encoder)
    assert all(
        hit.metadata["license"] != "MIT" for hits in searcher.search(QUERIES, k=60) for hit in hits
    )
    with pytest.raises(SemsearchError, match="column 'colour'"):
        index.delete(where="colour = 'red'")
    with pytest.raises(SemsearchError, match="no ids"):
        index.delete(ids=[])
    before = index.manifest.generation
    assert index.delete(ids=["nope"]).generation is None and index.manifest.generation == before


def test_add_refuses_duplicate_ids_and_another_id_column(tmp_path, tiny_encoder) -> None:
    index = Index(
        build(write(generated_table(20), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder)
    )
    duplicated = pa.concat_tables([generated_table(2, start=50), generated_table(1, start=50)])
    with pytest.raises(SemsearchError, match="'d50' appears more than once"):
        index.add(duplicated, encoder=tiny_encoder)
    from semsearch.index.update import add_rows

    with pytest.raises(SemsearchError, match="leave --id-column out"):
        add_rows(index.folder, write(generated_table(2), tmp_path / "b.parquet"), tiny_encoder,
                 id_column="text")  # fmt: skip
    assert index.manifest.generation == 1 and len(index.folder.generations()) == 1


def test_add_progress_moves_with_every_batch(tmp_path, tiny_encoder, monkeypatch) -> None:
    import semsearch.index.update as update_module
    from semsearch.index.store import IndexFolder

    updates: list[int] = []

    class Bar:
        def __init__(self, *args, total=None, disable=False, **kwargs) -> None:
            assert total == 100 and not disable

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def update(self, rows: int) -> None:
            updates.append(rows)

    folder = build(write(generated_table(20), tmp_path / "a.parquet"), tmp_path / "idx",
                   tiny_encoder)  # fmt: skip
    monkeypatch.setattr(update_module, "tqdm", Bar)
    update_module.add_rows(IndexFolder(folder.path), write(generated_table(100, start=20),
                           tmp_path / "b.parquet"), tiny_encoder, batch_size=16,
                           show_progress=True)  # fmt: skip
    assert sum(updates) == 100 and len(updates) > 1 and max(updates) <= 16
