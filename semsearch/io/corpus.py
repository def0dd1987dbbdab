"""Reading a corpus in record batches, whatever its format, and keeping only usable rows.

Parquet, CSV, TSV and JSON lines (each optionally gzipped) are streamed with pyarrow, so a
corpus larger than memory is read a batch at a time, from a local path or from a URI of a
pyarrow (or fsspec) filesystem (`semsearch.io.filesystems`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.fs as pafs
import pyarrow.json as pjson

from semsearch.errors import SemsearchError, one_line
from semsearch.io.delimited import MarkedStream, without_end_mark
from semsearch.io.filesystems import (
    GLOB_CHARACTERS,
    RemoteFile,
    as_location,
    input_stream,
    is_uri,
    parquet_file,
)

FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
SOURCE_ROW_COLUMN = "_source_row"
# Columns semsearch adds to the rows it stores (`_source_row` here, the other two in
# `semsearch.store.segment`): a corpus column of the same name would be overwritten.
RESERVED_COLUMNS = (SOURCE_ROW_COLUMN, "_semsearch_id", "_semsearch_text_hash")
ICONV_HINT = "convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8 IN > OUT"


@dataclass(frozen=True)
class Corpus:
    """A readable corpus file: its format, columns and (when the format says) row count."""

    path: Path | RemoteFile  # a RemoteFile for a URI (`s3://…`, `file://…`)
    format: str
    schema: pa.Schema
    num_rows: int | None

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def batches(
        self, rows: int = 8192, columns: list[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The corpus as record batches of at most `rows` rows (of `columns` only, when
        given), in file order."""
        try:
            yield from _read_batches(self, rows, columns)
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            raise SemsearchError(_unreadable(self.path, self.format, exc)) from exc


def open_corpus(path: str | Path | RemoteFile) -> Corpus:
    """Check that `path` (a local path or a URI) exists and is a corpus semsearch can read,
    and learn its columns."""
    path = as_location(path)
    _check_is_file(path)
    file_format = _format_of(path)
    try:
        schema, num_rows = _peek(path, file_format)
        schema.names  # noqa: B018 - pyarrow decodes a header's names only when asked
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise SemsearchError(_unreadable(path, file_format, exc)) from exc
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
    return Corpus(path=path, format=file_format, schema=schema, num_rows=num_rows)


def _check_is_file(path: Path | RemoteFile) -> None:
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


def is_many_files(corpus: str | Path) -> bool:
    """True for a folder, a glob pattern or a URI (`semsearch.ingest.corpus_files` reads those:
    a URI may name a file, a folder or a glob)."""
    if is_uri(corpus):
        return True
    path = Path(corpus).expanduser()
    return path.is_dir() or (not path.is_file() and any(c in str(corpus) for c in GLOB_CHARACTERS))


def default_name(corpus: str | Path) -> str:
    """An index name for a folder (its name) or a glob (the folder its pattern starts in);
    for a URI, also of one file (its name without suffixes)."""
    parts = as_location(corpus).parts
    plain: list[str] = []
    for part in parts:
        if any(character in part for character in GLOB_CHARACTERS):
            break
        plain.append(part)
    if is_uri(corpus):
        name = plain[-1] if plain else ""
        if len(plain) == len(parts) and name.lower().removesuffix(".gz").endswith(tuple(FORMATS)):
            name = name[: -len("".join(PurePosixPath(name).suffixes))] or name
        return name or Path.cwd().name
    name = Path(*plain).name if plain else ""
    return name or Path.cwd().name


@dataclass
class RowFilter:
    """Keeps rows with a non-empty text, checks ids are unique, and counts what it skipped.

    Every kept row gets `_source_row`, its position in the source file, so a result can
    always be traced back to the line it came from.
    """

    text_column: str | None
    id_column: str | None = None
    strict: bool = False
    skipped: int = 0
    rows_seen: int = 0
    _seen_ids: set = field(default_factory=set)

    def check_columns(self, corpus: Corpus) -> None:
        """Refuse, before anything is read or encoded, columns that cannot work."""
        for role, column in (("text", self.text_column), ("id", self.id_column)):
            if column is not None and not column.strip():
                raise SemsearchError(
                    f"the {role} column's name is blank: give it a name in {corpus.path.name} "
                    f"and pass that with --{role}-column"
                )
            if column is not None and column not in corpus.columns:
                raise SemsearchError(
                    f"{role} column {column!r} is not in {corpus.path.name}; its columns are: "
                    f"{', '.join(corpus.columns)} (choose one with --{role}-column)"
                )
        if self.id_column is not None and self.id_column == self.text_column:
            raise SemsearchError(
                f"{self.text_column!r} is both the text and the id column: choose a column of "
                "ids with --id-column, or leave it out to number the rows"
            )
        reserved = [name for name in corpus.columns if name in RESERVED_COLUMNS]
        if reserved:
            raise SemsearchError(
                f"{corpus.path.name} has a column named {reserved[0]!r}, which semsearch adds "
                "itself: rename that column"
            )
        if self.text_column is None:  # rows of your own vectors without texts
            return
        text_type = corpus.schema.field(self.text_column).type
        if not (_is_text(text_type) or pa.types.is_null(text_type)):
            raise SemsearchError(
                f"text column {self.text_column!r} holds {text_type}, not text: "
                "choose a string column with --text-column"
            )
        if self.id_column is not None:
            _check_id_type(corpus.schema.field(self.id_column).type, self.id_column)

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The usable rows of `batch`, with `_source_row` added."""
        first_row = self.rows_seen
        self.rows_seen += batch.num_rows
        batch = batch.append_column(
            SOURCE_ROW_COLUMN, pa.array(range(first_row, first_row + batch.num_rows), pa.int64())
        )
        texts = _as_text(batch.column(self.text_column))
        usable = pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(texts), ""), False)
        unusable = batch.num_rows - pc.sum(usable).as_py() if batch.num_rows else 0
        if unusable and self.strict:
            bad_row = first_row + pc.index(usable, False).as_py()
            raise SemsearchError(
                f"row {bad_row} has a null or empty {self.text_column!r} (--strict): "
                "fill or drop such rows, or build without --strict to skip them"
            )
        self.skipped += unusable
        kept = batch.filter(usable)
        if self.id_column is not None:
            self._check_ids(kept)
        return kept

    def _check_ids(self, batch: pa.RecordBatch) -> None:
        ids = batch.column(self.id_column)
        if ids.null_count:
            row = batch.column(SOURCE_ROW_COLUMN)[pc.index(pc.is_null(ids), True).as_py()]
            raise SemsearchError(
                f"id column {self.id_column!r} is empty in row {row}: every row needs an id"
            )
        for value, row in zip(ids.to_pylist(), batch.column(SOURCE_ROW_COLUMN).to_pylist()):
            if value in self._seen_ids:
                raise SemsearchError(
                    f"id {value!r} appears more than once in {self.id_column!r} (again in row {row}): "
                    "ids must be unique; deduplicate or choose another --id-column"
                )
            self._seen_ids.add(value)


def _format_of(path: Path) -> str:
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    file_format = FORMATS.get(suffixes[-1]) if suffixes else None
    if file_format is None:
        raise SemsearchError(
            f"{path.name} is not a supported corpus: use .parquet, .csv, .tsv or .jsonl (optionally .gz)"
        )
    if file_format == "parquet" and path.suffix.lower() == ".gz":
        raise SemsearchError(
            f"{path.name}: Parquet compresses itself; pass the uncompressed .parquet"
        )
    return file_format


def _peek(path: Path, file_format: str) -> tuple[pa.Schema, int | None]:
    if file_format == "parquet":
        with parquet_file(path) as parquet:
            return parquet.schema_arrow, parquet.metadata.num_rows
    if file_format == "jsonl":
        with _open_json(path, block_size=1 << 20) as reader:
            return reader.schema, None
    with _open_delimited(path, file_format, column_types=None) as reader:
        return reader.schema, None


def _read_batches(corpus: Corpus, rows: int, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
    if corpus.format == "parquet":
        with parquet_file(corpus.path) as parquet:
            yield from parquet.iter_batches(batch_size=rows, columns=columns)
        return
    if corpus.format == "jsonl":
        reader = _open_json(corpus.path, block_size=1 << 22)
    else:  # every delimited column is read as text: a CSV has no types to trust
        types = {name: pa.string() for name in corpus.schema.names}
        reader = _open_delimited(
            corpus.path,
            corpus.format,
            column_types=types,
            columns=columns,
            marked=len(corpus.schema.names),
        )
    with reader:
        batches = iter(reader)
        if corpus.format != "jsonl":  # read to the end: a quote never closed is refused
            batches = without_end_mark(batches, corpus.path.name)
        for batch in batches:
            if corpus.format == "jsonl":
                batch.validate(full=True)  # pyarrow's JSON reader takes bytes that are not UTF-8
            if columns is not None and corpus.format == "jsonl":
                batch = pa.RecordBatch.from_arrays(
                    [batch.column(name) for name in columns], columns
                )
            for start in range(0, batch.num_rows, rows):
                yield batch.slice(start, rows)


def _open_delimited(
    path: Path,
    file_format: str,
    column_types: dict | None,
    columns: list[str] | None = None,
    marked: int | None = None,
):
    """A streaming CSV/TSV reader; with `marked` (the header's column count), of the file
    followed by the end marker line that `delimited.without_end_mark` checks."""
    delimiter = "\t" if file_format == "tsv" else ","
    convert = pcsv.ConvertOptions(
        column_types=column_types or {}, strings_can_be_null=False, include_columns=columns
    )
    source = input_stream(path, compression="detect")
    if marked is not None:
        source = MarkedStream(source, marked, delimiter)
    return pcsv.open_csv(
        source,
        read_options=pcsv.ReadOptions(block_size=1 << 22),
        parse_options=pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
        convert_options=convert,
    )


def _open_json(path: Path, block_size: int):
    source = input_stream(path, compression="detect")
    return pjson.open_json(source, read_options=pjson.ReadOptions(block_size=block_size))


def _unreadable(path: Path, file_format: str, exc: BaseException) -> str:
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


def _is_text(data_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(data_type):
        data_type = data_type.value_type
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _as_text(texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Texts as plain strings: a dictionary-encoded column (a pandas category) or an
    all-null one (every text missing) becomes a string column."""
    if pa.types.is_dictionary(texts.type) or pa.types.is_null(texts.type):
        return texts.cast(pa.string())
    return texts


def _check_id_type(id_type: pa.DataType, id_column: str) -> None:
    """Ids are integers or strings: floats have NaN (never equal to itself), lists and
    structs cannot be compared, so neither can be told apart reliably."""
    if not (
        pa.types.is_integer(id_type)
        or pa.types.is_string(id_type)
        or pa.types.is_large_string(id_type)
    ):
        raise SemsearchError(
            f"id column {id_column!r} holds {id_type}; ids must be integers or strings: "
            "choose another --id-column"
        )


@dataclass(frozen=True)
class UsableRows:
    """The rows of a batch with a non-empty text, and where each sat in the source file."""

    batch: pa.RecordBatch
    source_rows: np.ndarray
    skipped: int


def usable_rows(
    batch: pa.RecordBatch, text_column: str, first_row: int, strict: bool = False
) -> UsableRows:
    """Keep the rows of `batch` (source rows `first_row`…) whose text is not null or blank.

    A pure function of its arguments, so batches can be filtered anywhere, in any order.
    """
    texts = _as_text(batch.column(text_column))
    usable = pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(texts), ""), False)
    kept = usable.to_numpy(zero_copy_only=False) if batch.num_rows else np.zeros(0, bool)
    skipped = int(batch.num_rows - kept.sum())
    if skipped and strict:
        bad_row = first_row + int(np.flatnonzero(~kept)[0])
        raise SemsearchError(
            f"row {bad_row} has a null or empty {text_column!r} (--strict): "
            "fill or drop such rows, or build without --strict to skip them"
        )
    return UsableRows(batch.filter(usable), first_row + np.flatnonzero(kept), skipped)


def check_id_column(corpus: Corpus, id_column: str) -> None:
    """Refuse an id column with empty, unhashable or repeated values, before anything is encoded."""
    _check_id_type(corpus.schema.field(id_column).type, id_column)
    check_ids(
        corpus.path, id_column, (batch.column(0) for batch in corpus.batches(columns=[id_column]))
    )


@dataclass(frozen=True)
class ColumnScan:
    """The text (and id) column of a whole corpus read once: its rows, those with a text, and
    the id column's batches (checked: none empty, none repeated, of a usable type)."""

    rows: int
    usable: int
    ids: list[pa.Array]


def scan_columns(
    corpus: Corpus, text_column: str, id_column: str | None = None, strict: bool = False
) -> ColumnScan:
    """Read the text (and id) column of the whole corpus once, count the rows with a text and
    check the ids.

    Run before encoding, so a file that stops being readable half-way (a stray byte that is
    not UTF-8, a JSON line of another shape), an empty or repeated id, or a blank text under
    `strict` fails in seconds, not after an hour of encoding, and the index type is chosen
    for the rows that will really be indexed.
    """
    columns = [text_column] if id_column in (None, text_column) else [text_column, id_column]
    usable = first_row = 0
    ids: list[pa.Array] = []
    for batch in corpus.batches(columns=columns):
        usable += len(
            usable_rows(batch.select([text_column]), text_column, first_row, strict).source_rows
        )
        if id_column is not None:
            ids.append(batch.column(id_column))
        first_row += batch.num_rows
    if id_column is not None:
        _check_id_type(corpus.schema.field(id_column).type, id_column)
        check_ids(corpus.path, id_column, ids)
    return ColumnScan(first_row, usable, ids)


def check_corpus(
    corpus: Corpus, text_column: str | None, id_column: str | None = None, strict: bool = False
) -> ColumnScan:
    """Everything `build` checks of a corpus before encoding it (its columns, every text, the
    ids), so `add` refuses exactly what `build` refuses."""
    RowFilter(text_column, id_column).check_columns(corpus)
    if text_column is None:  # rows of your own vectors without texts: only ids to check
        if id_column is not None:
            check_id_column(corpus, id_column)
        return ColumnScan(corpus.num_rows or 0, corpus.num_rows or 0, [])
    return scan_columns(corpus, text_column, id_column, strict)


def count_usable_rows(
    corpus: Corpus, text_column: str, id_column: str | None = None, strict: bool = False
) -> int:
    """The rows of `corpus` with a text, after `scan_columns` has checked it whole."""
    return scan_columns(corpus, text_column, id_column, strict).usable


def check_ids(path: Path, id_column: str, batches: Iterator[pa.Array] | list[pa.Array]) -> None:
    """Refuse an empty id, or one that repeats, among `batches` of `path`'s id column."""
    seen: list[pa.Array] = []
    first_row = 0
    for ids in batches:
        empty = pc.is_null(ids)
        if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type):
            blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(ids), ""), False)
            empty = pc.or_(empty, blank)  # "" is how a CSV writes a missing id
        if pc.any(empty).as_py():
            row = first_row + pc.index(empty, True).as_py()
            raise SemsearchError(
                f"id column {id_column!r} is empty in row {row} of {path.name}: every row needs an id"
            )
        seen.append(ids)
        first_row += len(ids)
    if not seen:
        return
    all_ids = pa.chunked_array(seen)
    counts = pc.value_counts(all_ids)
    repeated = pc.filter(counts, pc.greater(pc.struct_field(counts, [1]), 1))
    if len(repeated):
        value = repeated[0]["values"].as_py()
        rows = np.flatnonzero(
            pc.equal(all_ids, pa.scalar(value, all_ids.type)).to_numpy(zero_copy_only=False)
        )
        raise SemsearchError(
            f"id {value!r} appears more than once in {id_column!r} (rows {rows[0]} and {rows[1]}): "
            "ids must be unique; deduplicate or choose another --id-column"
        )


def rechunk(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """`batches` re-cut into batches of exactly `rows` rows (the last may be short), so parts
    start at fixed row numbers however the file was written."""
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    for batch in batches:
        pending.append(batch)
        pending_rows += batch.num_rows
        while pending_rows >= rows:
            table = pa.Table.from_batches(pending).combine_chunks()
            yield table.slice(0, rows).to_batches()[0]
            rest = table.slice(rows)
            pending = rest.to_batches()
            pending_rows = rest.num_rows
    if pending_rows:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def text_hashes(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each text, so a later `add` can tell a changed text from an unchanged one.

    The hash is the first 8 bytes of BLAKE2b over the text's UTF-8 bytes (little-endian,
    signed): indexes store it, so it never changes. Those bytes are hashed straight from the
    Arrow buffers, with no Python string per row (hashlib has no batch call, so one C call
    per text remains); a build runs it in its read stage, beside the encoder.
    """
    texts = _as_text(texts)
    chunks = texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]
    digests = b"".join(_blake2b_digests(chunk) for chunk in chunks)
    return np.frombuffer(digests, dtype="<i8").astype(np.int64)


def _blake2b_digests(texts: pa.Array) -> bytes:
    """The 8-byte BLAKE2b digests of `texts` (a null hashes as the empty text), back to back."""
    offset_type = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    _, offsets_buffer, data_buffer = texts.buffers()
    if offsets_buffer is None:  # an empty array
        return b""
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[texts.offset :][: len(texts) + 1]
    data = memoryview(data_buffer if data_buffer is not None else b"")
    blake2b = hashlib.blake2b
    return b"".join(
        [
            blake2b(data[start:end], digest_size=8).digest()
            for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist())
        ]
    )
