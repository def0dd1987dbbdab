"""Reading a corpus in record batches, whatever its format, and keeping only usable rows.

A file is opened (its format and columns checked) and read by `semsearch.io.corpus_readers`;
here its rows are checked: a text that is not blank, an id that is present, of a usable type
and unique, so `build` and `add` refuse the same things before anything is encoded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semsearch.errors import SemsearchError
from semsearch.io.corpus_readers import (
    READ_ERRORS,
    check_is_file,
    format_of,
    read_batches,
    read_schema,
    unreadable,
)
from semsearch.io.filesystems import RemoteFile, as_location, is_glob, is_uri

SOURCE_ROW_COLUMN = "_source_row"
# Columns semsearch adds to the rows it stores (`_source_row` here, the other two in
# `semsearch.store.segment`): a corpus column of the same name would be overwritten.
RESERVED_COLUMNS = (SOURCE_ROW_COLUMN, "_semsearch_id", "_semsearch_text_hash")


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
            yield from read_batches(self.path, self.format, self.columns, rows, columns)
        except READ_ERRORS as exc:
            raise SemsearchError(unreadable(self.path, self.format, exc)) from exc


def open_corpus(path: str | Path | RemoteFile) -> Corpus:
    """Check that `path` (a local path or a URI) exists and is a corpus semsearch can read,
    and learn its columns."""
    path = as_location(path)
    check_is_file(path)
    file_format = format_of(path)
    schema, num_rows = read_schema(path, file_format)
    return Corpus(path=path, format=file_format, schema=schema, num_rows=num_rows)


def is_many_files(corpus: str | Path) -> bool:
    """True for a folder, a glob pattern or a URI (`semsearch.ingest.corpus_files` reads those:
    a URI may name a file, a folder or a glob)."""
    if is_uri(corpus):
        return True
    path = Path(corpus).expanduser()
    return path.is_dir() or (not path.is_file() and is_glob(corpus))


@dataclass
class RowFilter:
    """Keeps rows with a non-empty text, checks ids are unique, counts what it skipped; each
    kept row gets `_source_row`, its position in the source file, to trace a result back."""

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
        rows = usable_rows(batch, self.text_column, self.rows_seen, self.strict)
        self.rows_seen += batch.num_rows
        self.skipped += rows.skipped
        kept = rows.batch.append_column(SOURCE_ROW_COLUMN, pa.array(rows.source_rows, pa.int64()))
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


def _is_text(data_type: pa.DataType) -> bool:
    """A string column, dictionary-encoded (a pandas category) or not."""
    if pa.types.is_dictionary(data_type):
        data_type = data_type.value_type
    return _is_string(data_type)


def _is_string(data_type: pa.DataType) -> bool:
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
    if not (pa.types.is_integer(id_type) or _is_string(id_type)):
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
    """Keep the rows of `batch` (source rows `first_row`…) whose text is not null or blank; a
    pure function, so batches can be filtered anywhere, in any order."""
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
    # Every row kept (the usual case): the batch as it is, not a copy of all its columns.
    kept_rows = batch if not skipped else batch.filter(usable)
    return UsableRows(kept_rows, first_row + np.flatnonzero(kept), skipped)


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
    check the ids: run before encoding, so a file unreadable half-way, a bad id or a blank
    text under `strict` fails in seconds, not after an hour of encoding."""
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


def check_ids(path: Path, id_column: str, batches: Iterator[pa.Array] | list[pa.Array]) -> None:
    """Refuse an empty id, or one that repeats, among `batches` of `path`'s id column."""
    seen: list[pa.Array] = []
    first_row = 0
    for ids in batches:
        empty = pc.is_null(ids)
        if _is_string(ids.type):
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
    value = first_repeated(all_ids)
    if value is not None:
        rows = np.flatnonzero(
            pc.equal(all_ids, pa.scalar(value, all_ids.type)).to_numpy(zero_copy_only=False)
        )
        raise SemsearchError(
            f"id {value!r} appears more than once in {id_column!r} (rows {rows[0]} and {rows[1]}): "
            "ids must be unique; deduplicate or choose another --id-column"
        )


def first_repeated(values: pa.Array | pa.ChunkedArray) -> object | None:
    """The first value of `values` (none of them null) that occurs more than once; None if
    every value is unique."""
    counts = pc.value_counts(values)
    repeated = pc.filter(counts, pc.greater(pc.struct_field(counts, [1]), 1))
    return repeated[0]["values"].as_py() if len(repeated) else None


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
    """A 64-bit hash of each text, so a later `add` can tell a changed text from an unchanged one:
    the first 8 bytes of BLAKE2b over its UTF-8 bytes (indexes store it: it never changes),
    hashed straight from the Arrow buffers, with no Python string per row."""
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
