"""Delimited text (CSV, TSV) read to its end, or refused where a quote is never closed.

Why: pyarrow's CSV reader takes a quote never closed as a value running to the end of the
file. So the file is read followed by a marker line: read back as a row of its own, the
file ended outside any quote and the row is dropped; swallowed into a value, the file is
refused, by `build` and `add` alike.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv

from semsearch.errors import SemsearchError
from semsearch.io.filesystems import RemoteFile, input_stream

END_MARK = "\x1fsemsearch-end-of-file\x1f"  # unit separators: no text a CSV carries


def open_delimited(
    path: Path | RemoteFile,
    file_format: str,
    column_types: dict | None,
    columns: list[str] | None = None,
    marked: int | None = None,
) -> pcsv.CSVStreamingReader:
    """A streaming CSV/TSV reader; with `marked` (the header's column count), of the file
    followed by the end marker line that `without_end_mark` checks."""
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


class MarkedStream(io.RawIOBase):
    """`stream`'s bytes, then a line of END_MARK in each of `columns` columns."""

    def __init__(self, stream, columns: int, delimiter: str) -> None:
        super().__init__()
        self.stream = stream
        self.tail = ("\n" + delimiter.join([END_MARK] * columns) + "\n").encode()

    def readable(self) -> bool:  # pyarrow's PythonFile asks before reading
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size) if size is None or size >= 0 else self.stream.read()
        if data:
            return data
        size = len(self.tail) if size is None or size < 0 else size
        data, self.tail = self.tail[:size], self.tail[size:]
        return data

    def close(self) -> None:
        self.stream.close()
        super().close()


def without_end_mark(batches: Iterator[pa.RecordBatch], name: str) -> Iterator[pa.RecordBatch]:
    """The batches of a `MarkedStream` less its marker row; a one-line SemsearchError where
    the marker was read into a value (a quote in file `name` is never closed)."""
    last: pa.RecordBatch | None = None
    rows = 0
    for batch in batches:
        if last is not None:
            yield last
        rows += batch.num_rows
        last = batch
    if last is not None and last.num_rows and last.column(0)[-1].as_py() == END_MARK:
        if last.num_rows > 1:
            yield last.slice(0, last.num_rows - 1)
        return
    where = f"row {rows - 1}" if rows else "its header"
    raise SemsearchError(
        f"{name}: a quote in {where} is never closed, so the rest of the file would be read "
        'as one value: close it (a quote inside a quoted value is written twice: "")'
    )
