"""New rows made to fit an index's column types, or refused: a value never changes meaning."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from semsearch.errors import SemsearchError
from semsearch.ingest.conform import Target, conform, index_schema, rename_text_column

SCHEMA = pa.schema(
    {"id": pa.int64(), "text": pa.string(), "year": pa.int64(), "score": pa.float64()}
)
TARGET = Target("docs", SCHEMA, "text", "id")


def _rows(**columns) -> pa.Table:
    return pa.table({"text": ["a"] * len(next(iter(columns.values()))), **columns})


def test_csv_values_are_read_as_the_index_type_only_when_they_stay_themselves() -> None:
    rows = conform(_rows(id=["10", "11"], year=["2005", "2006"]), TARGET, "csv")
    assert rows.schema.field("id").type == pa.int64() and rows.column("id").to_pylist() == [10, 11]
    for bad in ("01", "007", " 10", "1e3", "ten"):
        with pytest.raises(SemsearchError, match=f"id column 'id' holds string .*{bad!r}"):
            conform(_rows(id=["5", bad]), TARGET, "csv")
    with pytest.raises(SemsearchError, match="column 'year'.*'02005'"):
        conform(_rows(id=["1"], year=["02005"]), TARGET, "tsv")


def test_other_types_are_refused_unless_asked_and_lossless() -> None:
    strings = _rows(id=pa.array(["01"]))
    with pytest.raises(SemsearchError, match="--convert-types"):
        conform(strings, TARGET, "parquet")  # a typed file's strings are strings
    assert conform(strings, TARGET, "parquet", convert=True).column("id").to_pylist() == [1]
    floats = _rows(id=[1, 2], year=[2005.0, 2006.5])
    with pytest.raises(SemsearchError, match="'2006.5' would not stay itself"):
        conform(floats, TARGET, "parquet", convert=True)
    whole = conform(_rows(id=[1], year=[2005.0]), TARGET, "parquet", convert=True)
    assert whole.column("year").type == pa.int64() and whole.column("year").to_pylist() == [2005]


def test_a_timestamp_is_never_a_number() -> None:
    stamps = _rows(id=[1], year=pa.array([datetime.datetime(2020, 1, 1)], pa.timestamp("us")))
    for convert in (False, True):
        with pytest.raises(SemsearchError) as refused:
            conform(stamps, TARGET, "parquet", convert=convert)
        line = str(refused.value)
        assert "'year' holds timestamp[us] where index 'docs' holds int64" in line
        assert "--convert-types" not in line and "\n" not in line


def test_same_kinds_that_fit_and_nulls_convert() -> None:
    rows = conform(
        _rows(
            id=pa.array([1, 2], pa.int32()),
            score=pa.array([0.5, float("nan")], pa.float32()),
            year=pa.nulls(2),
        ),
        TARGET,
        "parquet",
    )
    assert rows.schema == pa.schema(
        {"text": pa.string(), "id": pa.int64(), "score": pa.float64(), "year": pa.int64()}
    )
    assert rows.column("score").to_pylist()[0] == 0.5


def test_the_text_column_takes_the_index_name_and_the_schema_spans_segments() -> None:
    rows = pa.table({"id": [1], "body": ["hello"]})
    assert rename_text_column(rows, "body", TARGET, "f.csv").column_names == ["id", "text"]
    with pytest.raises(SemsearchError, match="both 'body' .* and 'text'"):
        rename_text_column(rows.append_column("text", pa.array(["x"])), "body", TARGET, "f.csv")
    first = pa.schema({"id": pa.int64(), "tag": pa.null(), "_semsearch_id": pa.int64()})
    later = pa.schema({"id": pa.int64(), "tag": pa.string(), "extra": pa.bool_()})
    assert index_schema([first, later]) == pa.schema(
        {"id": pa.int64(), "tag": pa.string(), "extra": pa.bool_()}
    )
