"""The metadata of a generation's rows, read from the part files of the rows asked for.

Why: decoding every segment's metadata into one table on open took about a gigabyte a
million rows; a search needs the cells of about ten hits. Each part's uncompressed Arrow
copy (`part-NNNNN.arrow`) is memory-mapped when the generation opens and a hit's cells are
read in place: 0.3 ms per 10 hits, where decoding a Parquet row group cost 130 ms. The
mapping keeps serving the files it was opened on after `build --overwrite` replaces the
folder. Segments written before the Arrow copy are read from their Parquet, a few decoded
parts kept, and only while the folder is still the one opened (`unchanged`).
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from semsearch.errors import SemsearchError
from semsearch.store.documents import DOCUMENT_ROW_COLUMN, joined_names
from semsearch.store.metadata_rows import MetadataRows
from semsearch.store.part_ids import parts_among
from semsearch.store.segment import Segment

# Parts whose row lookup (`MetadataRows`, a few KB over the mapping) is kept built.
OPEN_ARROW_PARTS = 256
# Parquet parts kept decoded, for segments without an Arrow copy (each is a part's worth).
DECODED_PARQUET_PARTS = 4


class MetadataParts:
    """Rows of a generation's metadata by global row number; see the module docstring."""

    def __init__(
        self,
        segments: Sequence[Segment],
        skipped: set[str] = frozenset(),
        unchanged: Callable[[], None] = lambda: None,
    ) -> None:
        """`unchanged` raises when the index folder is no longer the one opened."""
        self.segments = list(segments)
        self._unchanged = unchanged
        self.schema = _unified_schema(self.segments)
        self.names = [name for name in self.schema.names if name not in skipped]
        lengths = [len(ids) for segment in self.segments for ids in segment.part_ids]
        self._starts = np.cumsum([0, *lengths], dtype=np.int64)
        self._where = [
            (position, part)
            for position, segment in enumerate(self.segments)
            for part in range(segment.record.parts)
        ]
        self._mapped = [
            _read(segment, lambda s=segment, p=part: _mapped_tables(s, p))
            if segment.record.metadata_arrow
            else None
            for segment in self.segments
            for part in range(segment.record.parts)
        ]
        self._open: OrderedDict[int, MetadataRows] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self._starts[-1])

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)

    def rows(
        self, numbers: np.ndarray | Sequence[int], columns: Sequence[str] | None = None
    ) -> list[dict]:
        """One dict per row number (each in [0, len)), in the order given, of `columns` (all
        when None); a column a segment lacks is None in its rows."""
        numbers = np.asarray(numbers, dtype=np.int64)
        if len(numbers) and (numbers.min() < 0 or numbers.max() >= len(self)):
            raise IndexError(f"row numbers must lie in [0, {len(self)})")
        part_of = np.searchsorted(self._starts, numbers, side="right") - 1
        records: list[dict] = [{} for _ in range(len(numbers))]
        for number in parts_among(part_of):
            chosen = np.flatnonzero(part_of == number)
            found = self._part(number).rows(numbers[chosen] - self._starts[number], columns)
            names = self.names if columns is None else [n for n in self.names if n in columns]
            for at, record in zip(chosen.tolist(), found):
                records[at] = {name: record.get(name) for name in names}
        return records

    def table(self, columns: list[str] | None = None) -> pa.Table:
        """Every stored row's metadata as one table: reads (and decodes) every part, for the
        few callers that truly need all of it (tests, benchmarks, one-off scripts)."""
        tables = []
        for segment in self.segments:
            present = (
                None if columns is None else [c for c in columns if c in segment.schema().names]
            )
            tables.append(_read(segment, lambda s=segment, p=present: s.metadata(p)))
        if len(tables) == 1:
            return tables[0]
        return pa.concat_tables(tables, promote_options="permissive")

    def _part(self, number: int) -> MetadataRows:
        with self._lock:
            if number in self._open:
                self._open.move_to_end(number)
                return self._open[number]
        position, part = self._where[number]
        segment = self.segments[position]
        tables = self._mapped[number]
        if tables is None:
            tables = _read(segment, lambda: _parquet_tables(segment, part, self.names))
            self._unchanged()  # the part read is the generation's, not a new index's
        chunks, documents = tables
        if documents is None:
            rows = MetadataRows(
                chunks, [name for name in self.names if name in chunks.column_names]
            )
        else:
            rows = DocumentRows(chunks, documents, self.names)
        with self._lock:
            self._open[number] = rows
            arrow = segment.record.metadata_arrow
            limit = OPEN_ARROW_PARTS if arrow else DECODED_PARQUET_PARTS
            while len(self._open) > limit:
                self._open.popitem(last=False)
        return rows


class DocumentRows:
    """A chunked part's rows by row number: each chunk row's cells and its document's, read
    from the part's documents table (`semsearch.store.documents`) by the chunk's document row."""

    def __init__(self, chunks: pa.Table, documents: pa.Table, names: Sequence[str]) -> None:
        order = joined_names(chunks.schema, documents.schema)
        self.names = [name for name in order if name in set(names)]
        own = [name for name in self.names if name in chunks.column_names]
        self._chunks = MetadataRows(chunks, [*own, DOCUMENT_ROW_COLUMN])
        self._documents = MetadataRows(documents, [name for name in self.names if name not in own])

    def rows(
        self, numbers: np.ndarray | Sequence[int], columns: Sequence[str] | None = None
    ) -> list[dict]:
        found = self._chunks.rows(numbers)
        document_rows = [record.pop(DOCUMENT_ROW_COLUMN) for record in found]
        wanted = [n for n in self._documents.names if columns is None or n in columns]
        if wanted:
            for record, document in zip(found, self._documents.rows(document_rows, wanted)):
                record.update(document)
        return found


def _mapped_tables(segment: Segment, part: int) -> tuple[pa.Table, pa.Table | None]:
    """The part's Arrow copy, and its documents table's where it has one, memory-mapped."""
    documents = (
        _mapped_table(segment.documents_arrow_path(part)) if segment.record.documents else None
    )
    return _mapped_table(segment.arrow_path(part)), documents


def _mapped_table(path) -> pa.Table:
    """An Arrow IPC file, memory-mapped: zero-copy views, no file handle kept."""
    handle = os.open(path, os.O_RDONLY)
    try:
        mapping = mmap.mmap(handle, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(handle)
    return pa.ipc.open_file(pa.py_buffer(mapping)).read_all()


def _parquet_tables(
    segment: Segment, part: int, names: list[str]
) -> tuple[pa.Table, pa.Table | None]:
    import pyarrow.parquet as pq  # only for a part without an Arrow copy

    path = segment.metadata_paths()[part]
    if segment.record.documents:
        documents = pq.read_table(segment.documents_paths()[part], memory_map=True)
        return pq.read_table(path, memory_map=True), documents
    present = [name for name in pq.read_schema(path).names if name in set(names)]
    return pq.read_table(path, columns=present, memory_map=True), None


def _unified_schema(segments: Sequence[Segment]) -> pa.Schema:
    """Every segment's columns, in first-seen order (a column added later is null before)."""
    schemas = [_read(segment, segment.schema) for segment in segments if segment.record.parts]
    if not schemas:
        return pa.schema([])
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SemsearchError(
            f"the metadata's column types differ between segments ({exc}): rebuild the index"
        ) from exc


def _read(segment: Segment, read):
    """`read()`; a part file missing or damaged is one clear line, not a traceback."""
    try:
        return read()
    except (OSError, pa.ArrowException) as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise SemsearchError(
            f"the metadata of segment {segment.folder} cannot be read ({reason}): roll back or "
            "rebuild the index with --overwrite"
        ) from exc
