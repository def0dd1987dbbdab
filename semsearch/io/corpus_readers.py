"""Each corpus format's pyarrow reader: the format a name says, the checked schema, the batches.

Parquet, CSV, TSV and JSON lines (each optionally gzipped) are streamed with pyarrow, so a
corpus larger than memory is read a batch at a time, from a local path or from a URI of a
pyarrow (or fsspec) filesystem (`semsearch.io.filesystems`). What pyarrow cannot read
becomes one line that names the file and the fix (`unreadable`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.json as pjson

from semsearch.errors import SemsearchError, one_line
from semsearch.io.delimited import open_delimited, without_end_mark
from semsearch.io.filesystems import RemoteFile, input_stream, parquet_file

FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
ICONV_HINT = "convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8 IN > OUT"
READ_ERRORS = (pa.ArrowException, OSError, UnicodeDecodeError)


def corpus_format(path: Path | RemoteFile) -> str | None:
    """The format `path`'s name says (`parquet`, `csv`, `tsv`, `jsonl`; a `.gz` after it
    allowed), or None for a file of another kind."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return FORMATS.get(suffixes[-1]) if suffixes else None


def format_of(path: Path | RemoteFile) -> str:
    """`corpus_format`, or a one-line error for a name no corpus has."""
    file_format = corpus_format(path)
    if file_format is None:
        raise SemsearchError(
            f"{path.name} is not a supported corpus: use .parquet, .csv, .tsv or .jsonl (optionally .gz)"
        )
    if file_format == "parquet" and path.suffix.lower() == ".gz":
        raise SemsearchError(
            f"{path.name}: Parquet compresses itself; pass the uncompressed .parquet"
        )
    return file_format


def check_is_file(path: Path | RemoteFile) -> None:
    if isinstance(path, RemoteFile):
        kind = path.info().type
        exists, is_file = kind != pafs.FileType.NotFound, kind == pafs.FileType.File
    else:
        exists, is_file = path.exists(), path.is_file()
    if not exists:
        what = "URI" if isinstance(path, RemoteFile) else "path"
        raise SemsearchError(f"corpus file {path} does not exist: check the {what}")
    if not is_file:
        raise SemsearchError(
            f"corpus {path} is not a file: pass a .parquet, .csv, .tsv or .jsonl file"
        )


def read_schema(path: Path | RemoteFile, file_format: str) -> tuple[pa.Schema, int | None]:
    """The file's columns, checked (at least one, each named once, a delimited file's header
    UTF-8 text), and its row count where the format records it."""
    try:
        schema, num_rows = _peek(path, file_format)
        schema.names  # noqa: B018 - pyarrow decodes a header's names only when asked
    except READ_ERRORS as exc:
        raise SemsearchError(unreadable(path, file_format, exc)) from exc
    if not schema.names:
        raise SemsearchError(f"{path} has no columns: it needs at least a text column")
    repeated = sorted({name for name in schema.names if schema.names.count(name) > 1})
    if repeated:
        raise SemsearchError(
            f"{path.name} has more than one column named {repeated[0]!r}: give each column its own name"
        )
    if file_format in ("csv", "tsv"):
        if any(pa.types.is_binary(column.type) for column in schema):
            raise SemsearchError(f"{path.name} is not UTF-8 text: {ICONV_HINT}")
        # Every delimited column is read as text (a CSV has no types to trust), so say so:
        # a header-only file has text columns with no rows, not columns of type null.
        schema = pa.schema([pa.field(name, pa.string()) for name in schema.names])
    return schema, num_rows


def _peek(path: Path | RemoteFile, file_format: str) -> tuple[pa.Schema, int | None]:
    if file_format == "parquet":
        with parquet_file(path) as parquet:
            return parquet.schema_arrow, parquet.metadata.num_rows
    if file_format == "jsonl":
        with _open_json(path, block_size=1 << 20) as reader:
            return reader.schema, None
    with open_delimited(path, file_format, column_types=None) as reader:
        return reader.schema, None


def read_batches(
    path: Path | RemoteFile,
    file_format: str,
    names: list[str],
    rows: int,
    columns: list[str] | None,
) -> Iterator[pa.RecordBatch]:
    """Batches of at most `rows` rows (of `columns` only, when given) of a file whose
    columns are `names`, in file order; a delimited file is read to its end mark."""
    if file_format == "parquet":
        with parquet_file(path) as parquet:
            yield from parquet.iter_batches(batch_size=rows, columns=columns)
        return
    if file_format == "jsonl":
        reader = _open_json(path, block_size=1 << 22)
    else:  # every delimited column is read as text: a CSV has no types to trust
        types = {name: pa.string() for name in names}
        reader = open_delimited(path, file_format, types, columns, marked=len(names))
    with reader:
        batches = iter(reader)
        if file_format != "jsonl":  # read to the end: a quote never closed is refused
            batches = without_end_mark(batches, path.name)
        for batch in batches:
            if file_format == "jsonl":
                batch.validate(full=True)  # pyarrow's JSON reader takes bytes that are not UTF-8
            if columns is not None and file_format == "jsonl":
                batch = batch.select(columns)
            for start in range(0, batch.num_rows, rows):
                yield batch.slice(start, rows)


def _open_json(path: Path | RemoteFile, block_size: int):
    source = input_stream(path, compression="detect")
    return pjson.open_json(source, read_options=pjson.ReadOptions(block_size=block_size))


def unreadable(path: Path | RemoteFile, file_format: str, exc: BaseException) -> str:
    """The one line for a corpus pyarrow cannot read; text that is not UTF-8 gets the fix."""
    reason = one_line(exc)
    if isinstance(exc, UnicodeDecodeError) or re.search(r"utf-?8", reason, re.IGNORECASE):
        return f"{path.name} is not UTF-8 text ({reason}): {ICONV_HINT}"
    if "Column() changed from object" in reason and file_format == "jsonl":
        found = _first_line_not_an_object(path)  # pyarrow's row counts skip blank lines
        if found is not None:
            return (
                f"{path.name}: line {found[0]} holds a JSON {found[1]}, not an object: each line "
                'of a .jsonl corpus must be one JSON object, such as {"text": "..."}'
            )
    if "changed from" in reason:  # pyarrow's JSON reader wants one type per field
        return f"{path.name}: {reason}: give each field one type on every line (e.g. quote numbers)"
    return f"{path} is not a readable {file_format} file ({reason}): check its format"


def _first_line_not_an_object(path: Path | RemoteFile) -> tuple[int, str] | None:
    """The number (from 1) of the first line of a .jsonl file that holds JSON other than an
    object or null, and what it holds ("array", "string", ...); None if there is none."""
    kinds = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    for number, line in enumerate(_lines(path), start=1):
        try:
            value = json.loads(line) if line.strip() else None
        except ValueError:
            continue  # not JSON at all: pyarrow says so in its own words
        if value is not None and not isinstance(value, dict):
            return number, kinds.get(type(value), type(value).__name__)
    return None


def _lines(path: Path | RemoteFile, block: int = 1 << 20) -> Iterator[bytes]:
    """The lines of a file (decompressed where its name says so), read a block at a time."""
    with input_stream(path, compression="detect") as stream:
        rest = b""
        while chunk := stream.read(block):
            *lines, rest = (rest + chunk).split(b"\n")
            yield from lines
        yield rest
