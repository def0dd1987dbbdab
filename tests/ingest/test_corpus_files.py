"""A corpus of many files: found, checked for one format and one set of columns, cut into parts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.ingest.build_options import default_name
from semsearch.ingest.corpus_files import check_unique_ids, open_all, resolve_files, scan_file
from semsearch.ingest.file_parts import plan_units, read_unit
from semsearch.io.corpus import is_many_files


def _write(path, first: int, rows: int, **extra) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    texts = ["" if i % 10 == 3 else f"text {first + i}" for i in range(rows)]
    table = pa.table({"id": [f"r{first + i}" for i in range(rows)], "text": texts, **extra})
    pq.write_table(table, path, row_group_size=7)


def test_a_folder_or_glob_names_its_supported_files_in_order(tmp_path) -> None:
    _write(tmp_path / "data" / "b.parquet", 0, 3)
    _write(tmp_path / "data" / "sub" / "a.parquet", 0, 3)
    for ignored in ("_SUCCESS", ".hidden.parquet", "notes.txt"):
        (tmp_path / "data" / ignored).write_text("x")
    assert [p.name for p in resolve_files(tmp_path / "data")] == ["b.parquet", "a.parquet"]
    assert [p.name for p in resolve_files(f"{tmp_path}/data/**/*.parquet")] == [
        "b.parquet",
        "a.parquet",
    ]
    assert is_many_files(f"{tmp_path}/data/*.parquet") and is_many_files(tmp_path / "data")
    assert not is_many_files(tmp_path / "data" / "b.parquet")
    assert default_name(f"{tmp_path}/data/*.parquet") == default_name(tmp_path / "data") == "data"
    with pytest.raises(SemsearchError, match="no file matches"):
        resolve_files(f"{tmp_path}/nothing/*.parquet")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SemsearchError, match="holds no .parquet"):
        resolve_files(tmp_path / "empty")


def test_files_must_share_format_and_columns(tmp_path) -> None:
    _write(tmp_path / "a.parquet", 0, 3)
    _write(tmp_path / "b.parquet", 3, 3, year=pa.array([1, 2, 3]))
    _write(tmp_path / "c.parquet", 6, 3, year=pa.array(["x", "y", "z"]))
    pcsv.write_csv(pa.table({"id": ["q"], "text": ["t"]}), tmp_path / "d.csv")
    with pytest.raises(SemsearchError, match="b.parquet adds 'year'"):
        open_all([tmp_path / "a.parquet", tmp_path / "b.parquet"])
    with pytest.raises(
        SemsearchError, match="'year' is string in c.parquet but int64 in b.parquet"
    ):
        open_all([tmp_path / "b.parquet", tmp_path / "c.parquet"])
    with pytest.raises(SemsearchError, match="d.csv is csv but a.parquet is parquet"):
        open_all([tmp_path / "a.parquet", tmp_path / "d.csv"])


def test_parts_and_ids_span_the_files_in_order_and_resume_where_missing(tmp_path) -> None:
    _write(tmp_path / "a.parquet", 0, 25)
    _write(tmp_path / "b.parquet", 25, 12)
    scans = [
        scan_file(str(tmp_path / name), "text", "id", False) for name in ("a.parquet", "b.parquet")
    ]
    assert [(s.rows, s.usable) for s in scans] == [(25, 22), (12, 11)]
    check_unique_ids(scans, "id")
    units = plan_units(scans, part_rows=5, written=lambda part: part in (1, 2), parts_per_read=4)
    assert [(u.path.endswith("a.parquet"), u.start, u.stop, u.wanted) for u in units] == [
        (True, 0, 20, (0, 3)),
        (True, 20, 25, (4,)),
        (False, 0, 12, (5, 6, 7)),
    ]
    parts = [part for unit in units for part in read_unit(unit, "text", 5)]
    assert [part.part for part in parts] == [0, 3, 4, 5, 6, 7]
    ids = np.concatenate([part.ids for part in parts])
    texts = [text for part in parts for text in part.batch.column("text").to_pylist()]
    assert texts == [f"text {i}" for i in ids]  # each row's id is its row number across the files
    assert 3 not in ids and 15 in ids and 36 in ids and 10 not in ids  # parts 1, 2 are written
    with pytest.raises(SemsearchError, match="'r0' appears in more than one file"):
        check_unique_ids(
            [*scans, scan_file(str(tmp_path / "a.parquet"), "text", "id", False)], "id"
        )
