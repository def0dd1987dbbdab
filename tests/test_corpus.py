"""Reading corpora of every supported format, and filtering their rows."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.corpus import SOURCE_ROW_COLUMN, RowFilter, open_corpus
from semsearch.errors import SemsearchError

ROWS = [("a", "first text"), ("b", "second, with a comma"), ("c", 'third "quoted"')]


def _write(path, kind: str) -> None:
    if kind == "parquet":
        pq.write_table(pa.table({"id": [r[0] for r in ROWS], "text": [r[1] for r in ROWS]}), path)
        return
    if kind == "jsonl":
        lines = "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in ROWS)
    else:
        sep = "\t" if kind == "tsv" else ","
        quote = lambda value: '"' + value.replace('"', '""') + '"'  # noqa: E731
        lines = f"id{sep}text\n" + "".join(f"{i}{sep}{quote(t)}\n" for i, t in ROWS)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(lines.encode()))
    else:
        path.write_text(lines, encoding="utf-8")


@pytest.mark.parametrize(
    "name,kind",
    [
        ("c.parquet", "parquet"),
        ("c.csv", "csv"),
        ("c.tsv", "tsv"),
        ("c.jsonl", "jsonl"),
        ("c.tsv.gz", "tsv"),
        ("c.jsonl.gz", "jsonl"),
    ],  # fmt: skip
)
def test_every_format_yields_the_same_rows(tmp_path, name, kind) -> None:
    path = tmp_path / name
    _write(path, kind)
    corpus = open_corpus(path)
    assert corpus.columns == ["id", "text"]
    rows = RowFilter("text", "id")
    table = pa.Table.from_batches([rows.apply(b) for b in corpus.batches(rows=2)])
    assert table.column("text").to_pylist() == [r[1] for r in ROWS]
    assert table.column(SOURCE_ROW_COLUMN).to_pylist() == [0, 1, 2]


def test_missing_file(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="does not exist"):
        open_corpus(tmp_path / "nope.parquet")


def test_unsupported_extension(tmp_path) -> None:
    (tmp_path / "notes.docx").write_text("hello")
    with pytest.raises(SemsearchError, match="not a supported corpus"):
        open_corpus(tmp_path / "notes.docx")


def test_file_that_is_not_parquet(tmp_path) -> None:
    (tmp_path / "fake.parquet").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(SemsearchError, match="not a readable parquet"):
        open_corpus(tmp_path / "fake.parquet")


def test_missing_text_column_lists_the_columns(tmp_path) -> None:
    path = tmp_path / "c.parquet"
    _write(path, "parquet")
    with pytest.raises(SemsearchError, match=r"'body'.*columns are: id, text"):
        RowFilter("body").check_columns(open_corpus(path))


def test_non_text_column_is_refused(tmp_path) -> None:
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), path)
    with pytest.raises(SemsearchError, match="not text"):
        RowFilter("text").check_columns(open_corpus(path))


def test_null_and_empty_texts_are_skipped_and_counted(tmp_path) -> None:
    batch = pa.record_batch({"text": ["ok", None, "", "   ", "fine"]})
    rows = RowFilter("text")
    kept = rows.apply(batch)
    assert kept.column("text").to_pylist() == ["ok", "fine"]
    assert kept.column(SOURCE_ROW_COLUMN).to_pylist() == [0, 4]
    assert rows.skipped == 3


def test_strict_fails_on_the_first_empty_text() -> None:
    with pytest.raises(SemsearchError, match="row 1 .*--strict"):
        RowFilter("text", strict=True).apply(pa.record_batch({"text": ["ok", ""]}))


def test_duplicate_ids_across_batches_are_refused() -> None:
    rows = RowFilter("text", "id")
    rows.apply(pa.record_batch({"id": ["x", "y"], "text": ["a", "b"]}))
    with pytest.raises(SemsearchError, match="'y' appears more than once"):
        rows.apply(pa.record_batch({"id": ["z", "y"], "text": ["c", "d"]}))


def test_ids_of_skipped_rows_do_not_count() -> None:
    rows = RowFilter("text", "id")
    kept = rows.apply(pa.record_batch({"id": ["x", "x"], "text": ["", "kept"]}))
    assert kept.num_rows == 1
