"""Hits' metadata read from their part files: the rows written, whatever the index went through."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.maintain import compact, rollback
from semsearch.ingest.update import add_rows, delete_rows
from semsearch.search.searcher import Searcher
from semsearch.search.snapshot import open_snapshot
from semsearch.store import metadata_parts
from semsearch.store.folders import IndexFolder
from semsearch.store.metadata_parts import MetadataParts
from semsearch.store.segment import Segment

DIMENSION = 4


def typed_rows(rows: int, first: int = 0) -> pa.Table:
    """Rows with ints, strings, lists, nulls and timestamps, and their own vectors."""
    numbers = range(first, first + rows)
    vectors = np.random.default_rng(first).normal(size=(rows, DIMENSION)).astype(np.float32)
    return pa.table(
        {
            "key": [f"k{i}" for i in numbers],
            "emb": pa.array(list(vectors), pa.list_(pa.float32())),
            "year": pa.array([2000 + i for i in numbers], pa.int64()),
            "name": [f"name {i} é" for i in numbers],
            "tags": pa.array(
                [[f"t{j}" for j in range(i % 3)] for i in numbers], pa.list_(pa.string())
            ),
            "score": [None if i % 4 == 0 else i / 2 for i in numbers],
            "seen": pa.array(
                [dt.datetime(2020, 1, 1) + dt.timedelta(hours=i) for i in numbers],
                pa.timestamp("us"),
            ),
        }
    )


def build(tmp_path: Path, rows: int = 40, part_rows: int = 7) -> IndexFolder:
    path = tmp_path / "c.parquet"
    pq.write_table(typed_rows(rows), path)
    return build_index(
        BuildOptions(
            corpus=path,
            out_dir=tmp_path / "idx",
            vector_column="emb",
            model=None,
            id_column="key",
            index="flat",
            part_rows=part_rows,
            show_progress=False,
        )
    )


def expected(*tables: pa.Table) -> dict[str, dict]:
    """Each written row by key, without its vector: what a hit must carry."""
    rows = [row for table in tables for row in table.drop_columns(["emb"]).to_pylist()]
    return {row["key"]: row for row in rows}


def check_every_live_row(folder: IndexFolder, written: dict[str, dict]) -> None:
    snapshot = open_snapshot(folder)
    live = np.flatnonzero(snapshot.live)
    got = snapshot.hit_metadata.rows(live[::-1])  # any order, across parts and segments
    assert {row["key"] for row in got} == {key for key in written if key in {r["key"] for r in got}}
    for row in got:
        assert row == {name: written[row["key"]].get(name) for name in row}
    assert len(got) == folder.manifest().rows


def test_hit_metadata_is_the_rows_written_with_their_types(tmp_path) -> None:
    folder = build(tmp_path)
    snapshot = open_snapshot(folder)
    assert snapshot.manifest.segments[0].parts == 6
    rows = snapshot.hit_metadata.rows([39, 0, 8, 7])
    assert rows == [
        {k: v for k, v in expected(typed_rows(40))[f"k{i}"].items()} for i in (39, 0, 8, 7)
    ]
    assert (
        isinstance(rows[0]["seen"], dt.datetime)
        and rows[3]["tags"] == ["t0"]
        and rows[0]["tags"] == []
    )
    assert rows[1]["score"] is None and isinstance(rows[0]["year"], int)
    assert "_semsearch_text_hash" not in rows[0] and "_semsearch_id" not in rows[0]


def test_hits_after_adds_deletes_compaction_and_rollback(tmp_path) -> None:
    folder = build(tmp_path)
    first, added = typed_rows(40), typed_rows(12, first=100)
    pq.write_table(added, tmp_path / "added.parquet")
    add_rows(folder, tmp_path / "added.parquet")
    delete_rows(folder, ["k3", "k101", "k20"])
    written = expected(first, added)
    check_every_live_row(folder, written)
    [hits] = Searcher(folder).search_vectors(added.column("emb")[5].values.to_numpy(), k=1)
    assert hits[0].id == "k105" and hits[0].metadata == {
        name: value for name, value in written["k105"].items() if name != "key"
    }
    compact(folder, keep=4)
    assert len(folder.manifest().segments) == 1
    check_every_live_row(folder, written)
    rollback(folder, 1)
    check_every_live_row(folder, expected(first))


def test_segments_without_an_arrow_copy_are_read_from_their_parquet(tmp_path, monkeypatch) -> None:
    folder = build(tmp_path)
    record = folder.manifest().segments[0]
    arrow = MetadataParts([Segment(folder.segment_dir(record.name), record)])
    old = replace(record, metadata_arrow=False)
    parquet = MetadataParts([Segment(folder.segment_dir(record.name), old)])
    monkeypatch.setattr(metadata_parts, "DECODED_PARQUET_PARTS", 2)
    assert parquet.rows(range(40)) == arrow.rows(range(40))
    assert len(parquet._open) == 2  # bounded: a part's worth each


def test_the_schema_comes_from_the_arrow_copy_and_is_the_parquet_one(tmp_path) -> None:
    folder = build(tmp_path)
    record = folder.manifest().segments[0]
    with_copy = Segment(folder.segment_dir(record.name), record)
    without = Segment(folder.segment_dir(record.name), replace(record, metadata_arrow=False))
    assert with_copy.schema().equals(without.schema(), check_metadata=True)
    assert with_copy.schema().names[:3] == ["key", "year", "name"]
    expected = without.schema()
    (folder.segment_dir(record.name) / "part-00000.parquet").unlink()  # not read with a copy
    assert with_copy.schema().equals(expected, check_metadata=True)


def test_open_arrow_parts_are_bounded(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(metadata_parts, "OPEN_ARROW_PARTS", 2)
    snapshot = open_snapshot(build(tmp_path))
    assert [row["key"] for row in snapshot.hit_metadata.rows(range(40))] == [
        f"k{i}" for i in range(40)
    ]
    assert len(snapshot.hit_metadata._open) == 2


@pytest.mark.parametrize("suffix", ["arrow", "parquet"])
def test_a_tampered_metadata_part_is_refused(tmp_path, suffix) -> None:
    folder = build(tmp_path)
    path = folder.segment_dir(folder.manifest().segments[0].name) / f"part-00002.{suffix}"
    data = bytearray(path.read_bytes())
    position = data.find(b"name 15")
    data[position + 5] = ord("9")  # same size, another value
    path.write_bytes(bytes(data))
    with pytest.raises(SemsearchError, match="part-00002.*content changed"):
        open_snapshot(folder)


def test_a_whole_table_is_read_only_when_asked_for(tmp_path) -> None:
    snapshot = open_snapshot(build(tmp_path))
    assert snapshot.hit_metadata.column_names[:2] == ["key", "year"]
    table = snapshot.hit_metadata.table()
    assert table.num_rows == 40 and table.column("key").to_pylist()[7] == "k7"
    assert snapshot.hit_metadata.table(["name"]).column_names == ["name"]


def test_a_record_written_before_the_arrow_copy_reads_as_without_one(tmp_path) -> None:
    data = build(tmp_path).manifest().to_dict()
    del data["segments"][0]["metadata_arrow"]
    manifest = type(open_snapshot(IndexFolder(tmp_path / "idx" / "c")).manifest).from_dict(data)
    assert manifest.segments[0].metadata_arrow is False
    assert not any(name.endswith(".arrow") for name in manifest.file_names())


def test_a_snapshot_keeps_its_own_rows_after_build_overwrite_replaced_the_folder(
    tmp_path,
) -> None:
    folder = build(tmp_path)
    snapshot = open_snapshot(folder)
    pq.write_table(typed_rows(40, first=500), tmp_path / "c.parquet")
    build_index(
        BuildOptions(
            corpus=tmp_path / "c.parquet",
            out_dir=tmp_path / "idx",
            vector_column="emb",
            model=None,
            id_column="key",
            index="flat",
            part_rows=7,
            overwrite=True,
            show_progress=False,
        )
    )
    assert [row["key"] for row in snapshot.hit_metadata.rows([0, 39])] == ["k0", "k39"]
    with pytest.raises(SemsearchError, match="was replaced .* reopen it"):
        snapshot.where_mask("year > 2001")
    searcher = Searcher(folder)
    assert searcher.snapshot.where_mask("year > 2538").sum() == 1
