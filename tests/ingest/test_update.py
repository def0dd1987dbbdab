"""`add` (upsert by id) and `delete`: new generations whose results equal a fresh build."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from living_support import build, generated_table, wide_search_params, write
from recording_bar import recording_bar

from semsearch.errors import SemsearchError
from semsearch.index import Index
from semsearch.search.searcher import Searcher

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
    grown = Index(
        build(
            write(first, tmp_path / "a.parquet"),
            tmp_path / "idx",
            tiny_encoder,
            index_type,
            target_recall=None,
        )
    )
    result = grown.add(second, encoder=tiny_encoder)
    assert (result.added, result.replaced, result.generation) == (100, 0, 2)
    whole = pa.concat_tables([first, second])
    fresh = build(
        write(whole, tmp_path / "all.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        index_type,
        name="fresh",
        target_recall=None,
    )
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
    from semsearch.ingest.update import add_rows

    with pytest.raises(SemsearchError, match="leave --id-column out"):
        add_rows(
            index.folder,
            write(generated_table(2), tmp_path / "b.parquet"),
            tiny_encoder,
            id_column="text",
        )
    assert index.manifest.generation == 1 and len(index.folder.generations()) == 1


def _int_ids_index(tmp_path, encoder) -> Index:
    """An index of 6 rows whose ids are the integers 1…6."""
    table = generated_table(6).set_column(0, "doc", pa.array(range(1, 7), pa.int64()))
    return Index(build(write(table, tmp_path / "ints.parquet"), tmp_path / "idx", encoder))


def _stored(index: Index, encoder) -> dict:
    hits = index.searcher(encoder=encoder).search(["number"], k=100)[0]
    return {hit.id: (hit.text, hit.metadata.get("year")) for hit in hits}


def test_a_csv_id_that_is_not_the_integer_as_written_never_replaces_a_row(
    tmp_path, tiny_encoder
) -> None:
    index = _int_ids_index(tmp_path, tiny_encoder)
    before = _stored(index, tiny_encoder)
    leading = tmp_path / "leading.csv"
    leading.write_text("doc,text,year\n01,leading zero id text,2005\n007,bond,2007\n")
    with pytest.raises(SemsearchError, match="id column 'doc' holds string .* '01'"):
        index.add(leading, encoder=tiny_encoder)
    assert index.manifest.generation == 1 and _stored(index, tiny_encoder) == before
    plain = tmp_path / "plain.csv"
    plain.write_text("doc,text,year\n10,ten as text,2010\n")
    assert index.add(plain, encoder=tiny_encoder).added == 1
    assert _stored(index, tiny_encoder)[10] == ("ten as text", 2010)
    from semsearch.ingest.update import add_rows

    # asked for: '01' is read as 1 (and replaces it), and '1' beside it is a repeated id
    result = add_rows(index.folder, leading, tiny_encoder, convert_types=True)
    assert (result.replaced, result.added) == (1, 1)
    assert _stored(index, tiny_encoder)[1] == ("leading zero id text", 2005)
    twice = tmp_path / "twice.csv"
    twice.write_text("doc,text\n01,a\n1,b\n")
    with pytest.raises(SemsearchError, match="appears more than once"):
        add_rows(index.folder, twice, tiny_encoder, convert_types=True)
    with pytest.raises(SemsearchError, match="'01' is not one of the index's 'doc' ids"):
        index.delete(ids=["01"])


def test_a_renamed_text_column_is_stored_as_the_index_text(tmp_path, tiny_encoder) -> None:
    index = _int_ids_index(tmp_path, tiny_encoder)
    from semsearch.ingest.update import add_rows

    renamed = write(
        pa.table({"doc": [20], "body": ["a renamed text column"], "year": [2020]}),
        tmp_path / "renamed.parquet",
    )
    assert add_rows(index.folder, renamed, tiny_encoder, text_column="body").added == 1
    hits = index.searcher(encoder=tiny_encoder).search(["a renamed text column"], k=1)[0]
    assert (hits[0].id, hits[0].text) == (20, "a renamed text column")
    assert "body" not in hits[0].metadata


def test_index_add_takes_a_renamed_text_column_and_convert_types(tmp_path, tiny_encoder) -> None:
    index = _int_ids_index(tmp_path, tiny_encoder)
    renamed = pa.table({"doc": [21], "body": ["added through Index.add"], "year": [2021]})
    assert index.add(renamed, encoder=tiny_encoder, text_column="body").added == 1
    hits = index.searcher(encoder=tiny_encoder).search(["added through Index.add"], k=1)[0]
    assert (hits[0].id, hits[0].text) == (21, "added through Index.add")
    as_text = pa.table({"doc": ["22"], "text": ["a string id that converts"], "year": [2022]})
    with pytest.raises(SemsearchError, match="convert-types"):
        index.add(as_text, encoder=tiny_encoder)
    assert index.add(as_text, encoder=tiny_encoder, convert_types=True).added == 1
    assert _stored(index, tiny_encoder)[22] == ("a string id that converts", 2022)


def test_a_changed_column_type_is_refused_and_a_changed_value_is_a_change(
    tmp_path, tiny_encoder
) -> None:
    import datetime

    index = _int_ids_index(tmp_path, tiny_encoder)
    before = _stored(index, tiny_encoder)
    stamps = pa.table(
        {
            "doc": [7],
            "text": ["timestamp year"],
            "year": pa.array([datetime.datetime(2020, 1, 1)], pa.timestamp("us")),
        }
    )
    with pytest.raises(SemsearchError, match="'year' holds timestamp.* index 'docs' holds int64"):
        index.add(stamps, encoder=tiny_encoder)
    same_text = tmp_path / "same.csv"  # row 2's text as it is, a year that is not a year
    same_text.write_text(f"doc,text,year\n2,{before[2][0]},abc\n")
    with pytest.raises(SemsearchError, match="'year' holds string .*'abc'"):
        index.add(same_text, encoder=tiny_encoder)
    assert index.manifest.generation == 1 and _stored(index, tiny_encoder) == before
    same_text.write_text(f"doc,text,year\n2,{before[2][0]},1999\n")
    result = index.add(same_text, encoder=tiny_encoder)
    assert (result.replaced, result.unchanged) == (1, 0)
    assert _stored(index, tiny_encoder)[2] == (before[2][0], 1999)


MALFORMED_CSVS = {
    "ragged.csv": b"doc,text\nd90,fine\nd91\n",
    "twice.csv": b"doc,text,text\nd90,a,b\n",
    "reserved.csv": b"doc,text,_source_row\nd90,a,1\n",
    "blank_id.csv": b"doc,text\n,a\n",
    "repeated.csv": b"doc,text\nd90,a\nd90,b\n",
    "latin1.csv": "doc,text\nd90,caf\u00e9\n".encode("latin-1"),
    "no_text.csv": b"doc,title\nd90,a\n",
    "unclosed_quote.csv": b'doc,text\nd90,fine\nd91,"never closed\nd92,more\n',
}


@pytest.mark.parametrize("name", sorted(MALFORMED_CSVS))
def test_add_refuses_a_csv_exactly_as_build_does(tmp_path, tiny_encoder, name) -> None:
    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions
    from semsearch.ingest.update import add_rows

    index = Index(
        build(write(generated_table(4), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder)
    )
    path = tmp_path / name
    path.write_bytes(MALFORMED_CSVS[name])
    with pytest.raises(SemsearchError) as by_build:
        build_index(
            BuildOptions(
                corpus=path, name="x", id_column="doc", out_dir=tmp_path / "b", show_progress=False
            ),
            encoder=tiny_encoder,
        )
    with pytest.raises(SemsearchError) as by_add:
        add_rows(index.folder, path, tiny_encoder)
    assert str(by_add.value) == str(by_build.value)
    assert index.manifest.generation == 1
    if name == "unclosed_quote.csv":
        assert str(by_add.value) == (
            "unclosed_quote.csv: a quote in row 1 is never closed, so the rest of the file would "
            'be read as one value: close it (a quote inside a quoted value is written twice: "")'
        )


def test_add_progress_moves_with_every_batch(tmp_path, tiny_encoder, monkeypatch) -> None:
    import semsearch.ingest.parts as parts_module
    import semsearch.ingest.update as update_module
    from semsearch.store.folders import IndexFolder

    Bar = recording_bar()
    folder = build(
        write(generated_table(20), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder
    )
    monkeypatch.setattr(parts_module, "tqdm", Bar)
    update_module.add_rows(
        IndexFolder(folder.path),
        write(generated_table(100, start=20), tmp_path / "b.parquet"),
        tiny_encoder,
        batch_size=16,
        show_progress=True,
    )
    assert sum(Bar.updates) == 100 and len(Bar.updates) > 1 and max(Bar.updates) <= 16
    assert [(bar.get("total"), bar.get("disable", False)) for bar in Bar.opened] == [(100, False)]


def test_an_add_loads_the_model_only_for_rows_to_encode_and_says_so(
    tmp_path, tiny_encoder, monkeypatch, caplog
) -> None:
    import logging

    import semsearch.ingest.update as update_module
    from semsearch.store.folders import IndexFolder

    loads = []
    real = update_module.open_for_rows
    monkeypatch.setattr(
        update_module, "open_for_rows", lambda *args: loads.append(args) or real(*args)
    )
    table = generated_table(20)
    folder = IndexFolder(
        build(write(table, tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder).path
    )
    with caplog.at_level(logging.WARNING, logger="semsearch.ingest.update"):
        unchanged = update_module.add_rows(folder, tmp_path / "a.parquet", show_progress=True)
        assert unchanged.unchanged == 20 and loads == [] and "loading" not in caplog.text
        more = write(generated_table(3, start=20), tmp_path / "b.parquet")
        assert update_module.add_rows(folder, more, device="cpu", show_progress=True).added == 3
    assert (
        len(loads) == 1 and f"loading model {tiny_encoder.name} on cpu to encode 3" in caplog.text
    )
