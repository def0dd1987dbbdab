"""Reading corpora of every supported format, and filtering their rows."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.io.corpus import SOURCE_ROW_COLUMN, RowFilter, open_corpus, scan_columns

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
    ],
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


@pytest.mark.parametrize(
    "ids",
    [
        pa.array([[1], [2]]),
        pa.array([{"x": 1}, {"x": 2}]),
        pa.array([float("nan"), float("nan")]),
        pa.array([True, False]),
    ],
    ids=["lists", "structs", "NaN", "booleans"],
)
def test_ids_that_cannot_be_compared_are_refused_when_the_columns_are_checked(
    tmp_path, ids
) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": ids, "text": ["a", "b"]}), path)
    with pytest.raises(SemsearchError, match="ids must be integers or strings"):
        RowFilter("text", "id").check_columns(open_corpus(path))


@pytest.mark.parametrize("reserved", ["_source_row", "_semsearch_id", "_semsearch_text_hash"])
def test_a_column_named_like_one_of_semsearchs_own_is_refused(tmp_path, reserved) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["a"], reserved: [1]}), path)
    with pytest.raises(SemsearchError, match=f"named '{reserved}'.*rename"):
        RowFilter("text").check_columns(open_corpus(path))


def test_a_repeated_header_name_is_refused(tmp_path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("text,note,note\na,b,c\n")
    with pytest.raises(SemsearchError, match="more than one column named 'note'"):
        open_corpus(path)


def test_a_latin1_csv_is_refused_with_the_conversion_to_make(tmp_path) -> None:
    path = tmp_path / "c.csv"
    path.write_bytes("text\ncafé au lait\n".encode("latin-1"))
    with pytest.raises(SemsearchError, match="not UTF-8 text.*iconv -f latin1 -t utf-8"):
        open_corpus(path)


def test_a_latin1_header_of_a_file_with_no_rows_says_so(tmp_path) -> None:
    path = tmp_path / "c.csv"
    path.write_bytes("tëxt,text\n".encode("latin-1"))  # found by make fuzz
    with pytest.raises(SemsearchError, match="not UTF-8 text.*iconv"):
        open_corpus(path)


def test_a_byte_that_is_not_utf8_deep_in_a_jsonl_file_says_so(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"text": "fine"}\n' * 3 + '{"text": "café"}\n'.encode("latin-1"))
    with pytest.raises(SemsearchError, match="iconv"):
        scan_columns(open_corpus(path), "text")


def test_a_jsonl_line_that_is_not_an_object_is_named_by_its_line_number(tmp_path) -> None:
    """pyarrow says 'Column() changed from object to array in row 1' (its rows skip blank
    lines, and count from its block's start); the advice was to quote numbers."""
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "a"}\n\n{"text": "b"}\n["text", "c"]\n')
    with pytest.raises(SemsearchError) as refused:
        open_corpus(path)
    assert str(refused.value) == (
        "c.jsonl: line 4 holds a JSON array, not an object: each line of a .jsonl corpus must "
        'be one JSON object, such as {"text": "..."}'
    )
    deep = tmp_path / "deep.jsonl.gz"  # past the first block read, and compressed
    with gzip.open(deep, "wt") as file:
        file.write("".join(f'{{"text": "row {i}"}}\n' for i in range(60_000)) + '"row"\n')
    with pytest.raises(SemsearchError, match="line 60001 holds a JSON string, not an object"):
        scan_columns(open_corpus(deep), "text")


def test_a_header_only_csv_has_text_columns_and_no_rows(tmp_path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("id,text\n")
    corpus = open_corpus(path)
    assert corpus.schema.field("text").type == pa.string()
    RowFilter("text", "id").check_columns(corpus)
    assert scan_columns(corpus, "text", "id").usable == 0


def test_a_dictionary_encoded_text_column_is_text(tmp_path) -> None:
    path = tmp_path / "c.parquet"
    texts = pa.array(["a", " ", None, "a", "b"]).dictionary_encode()
    pq.write_table(pa.table({"text": texts}), path)
    corpus = open_corpus(path)
    RowFilter("text").check_columns(corpus)
    assert scan_columns(corpus, "text").usable == 3


def test_counting_usable_rows_reads_the_whole_file_and_checks_ids(tmp_path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("id,text\n1,a\n2,\n3,c\n")
    corpus = open_corpus(path)
    assert scan_columns(corpus, "text", "id").usable == 2
    with pytest.raises(SemsearchError, match="row 1 has a null or empty 'text'"):
        scan_columns(corpus, "text", "id", strict=True)
    path.write_text("id,text\n1,a\n,b\n")  # a CSV writes a missing id as nothing
    with pytest.raises(SemsearchError, match="id column 'id' is empty in row 1"):
        scan_columns(open_corpus(path), "text", "id")


def test_text_and_id_must_be_named_and_different_columns(tmp_path) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"": ["x"], "text": ["a"]}), path)
    corpus = open_corpus(path)
    with pytest.raises(SemsearchError, match="name is blank"):
        RowFilter("").check_columns(corpus)
    with pytest.raises(SemsearchError, match="both the text and the id column"):
        RowFilter("text", "text").check_columns(corpus)


def test_text_hashes_are_the_stored_blake2b_values_read_from_the_arrow_buffers() -> None:
    import hashlib

    from semsearch.io.corpus import text_hashes

    def stored(text: str) -> int:  # what indexes already hold: it must never change
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little", signed=True)

    texts = ["", "café ☕", "a", "a longer text with spaces", "日本語のテキスト", " ", "a"] * 3
    expected = [stored(text) for text in texts]
    whole = pa.array(texts)
    assert text_hashes(whole).tolist() == expected
    assert text_hashes(whole.slice(5, 9)).tolist() == expected[5:14]  # an offset into buffers
    assert text_hashes(whole.cast(pa.large_string())).tolist() == expected
    assert text_hashes(pa.chunked_array([whole.slice(0, 4), whole.slice(4)])).tolist() == expected
    assert text_hashes(whole.dictionary_encode()).tolist() == expected
    assert text_hashes(pa.array([], pa.string())).dtype == np.int64


@pytest.mark.slow
def test_reading_batches_holds_one_row_group_not_the_file(tmp_path) -> None:
    # A vector column read batch by batch (a build's own vectors) must not pile up in Arrow's
    # memory: pyarrow's pre-buffer cache kept every row group read, 15 GB in a 20M-row build.
    # Row groups as the benchmark writes them (262,144 rows of 384 fp16): smaller ones do not
    # show it.
    path = tmp_path / "vectors.parquet"
    rows_per_group, groups, dimension = 262_144, 4, 384
    rng = np.random.default_rng(0)  # random values: constant ones dictionary-encode to nothing
    schema = pa.schema([("emb", pa.list_(pa.float16(), dimension)), ("bucket", pa.int32())])
    with pq.ParquetWriter(path, schema, compression="none") as writer:
        for _group in range(groups):
            flat = rng.standard_normal(rows_per_group * dimension, np.float32).astype(np.float16)
            emb = pa.FixedSizeListArray.from_arrays(pa.array(flat), dimension)
            bucket = pa.array(np.zeros(rows_per_group, np.int32))
            writer.write_table(pa.table({"emb": emb, "bucket": bucket}, schema=schema))
    group_bytes = rows_per_group * dimension * 2
    before, peak, rows = pa.total_allocated_bytes(), 0, 0
    for batch in open_corpus(path).batches(columns=["emb"]):
        rows += batch.num_rows
        peak = max(peak, pa.total_allocated_bytes() - before)
        del batch
    assert rows == rows_per_group * groups
    assert peak < 1.5 * group_bytes, f"{peak / group_bytes:.1f} row groups held"
