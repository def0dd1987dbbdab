"""A chunked part's document columns, stored once per document: split on write, joined on read.

Why: every chunk repeated its document's columns, so a document of 60 chunks stored its
metadata 60 times in the Parquet part and 60 times in its Arrow copy. A chunked part is now
two tables: the chunk rows (`part-00000.parquet` / `.arrow`: ids, chunk columns, the text,
the document column and `DOCUMENT_ROW_COLUMN`, the row of the chunk's document) and one
row per document (`part-00000.documents.parquet` / `.arrow`). A document whose chunks run
into the next part is stored once in each. Every reader gets the rows joined back (`join`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

# The chunk's row in its part's documents table.
DOCUMENT_ROW_COLUMN = "_semsearch_document_row"
# The joined table's column order, kept in the documents table's schema metadata.
ORDER_KEY = b"semsearch.columns"


@dataclass(frozen=True)
class DocumentSplit:
    """Which columns stay on each chunk row; the others are the document's, stored once.

    `chunk_columns` holds the reserved id columns, the chunk columns, the text column and
    `document_column` (kept on both sides: `add` and `delete` read a document's chunks by
    it without a join)."""

    document_column: str
    chunk_columns: frozenset[str]

    def split(self, table: pa.Table) -> tuple[pa.Table, pa.Table]:
        """The part's chunk rows (with their document row) and its documents table."""
        document_names = [
            name
            for name in table.column_names
            if name == self.document_column or name not in self.chunk_columns
        ]
        starts = _run_starts(table.select(document_names))
        documents = table.select(document_names).take(pa.array(starts))
        order = json.dumps(table.column_names).encode()
        documents = documents.replace_schema_metadata({ORDER_KEY: order})
        rows = np.repeat(np.arange(len(starts), dtype=np.int32), np.diff([*starts, len(table)]))
        chunk_names = [name for name in table.column_names if name in self.chunk_columns]
        chunks = table.select(chunk_names).append_column(DOCUMENT_ROW_COLUMN, pa.array(rows))
        return chunks, documents


def _run_starts(columns: pa.Table) -> list[int]:
    """The first row of each run of consecutive rows equal in every column: a document's
    chunks come one after another, so a run is a document (a document whose columns change
    between its chunks, which a build never writes, would be stored once for each run)."""
    if columns.num_rows == 0:
        return []
    changed = np.zeros(columns.num_rows, dtype=bool)
    changed[0] = True
    for column in columns.columns:
        changed[1:] |= _differs_from_previous(column.combine_chunks())
    return np.flatnonzero(changed).tolist()


def _differs_from_previous(values: pa.Array) -> np.ndarray:
    import pyarrow.compute as pc  # only where parts are written: a query never needs it

    before, after = values.slice(0, len(values) - 1), values.slice(1)
    try:
        unequal = pc.fill_null(pc.not_equal(after, before), False)
        null_changed = pc.xor(pc.is_null(after), pc.is_null(before))
        return pc.or_(unequal, null_changed).to_numpy(zero_copy_only=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # lists, structs: compare in Python
        cells = values.to_pylist()
        return np.array([a != b for a, b in zip(cells[1:], cells[:-1])], dtype=bool)


def joined_names(chunks: pa.Schema, documents: pa.Schema) -> list[str]:
    """The joined table's columns, in the order the rows had before the split."""
    order = (documents.metadata or {}).get(ORDER_KEY)
    names = [n for n in chunks.names if n != DOCUMENT_ROW_COLUMN]
    names += [n for n in documents.names if n not in names]
    if order is None:
        return names
    recorded = [name for name in json.loads(order) if name in names]
    return recorded + [name for name in names if name not in recorded]


def joined_schema(chunks: pa.Schema, documents: pa.Schema) -> pa.Schema:
    fields = {f.name: f for f in documents if f.name not in chunks.names}
    fields |= {f.name: f for f in chunks}
    return pa.schema([fields[name] for name in joined_names(chunks, documents)])


def join(chunks: pa.Table, documents: pa.Table, columns: list[str] | None = None) -> pa.Table:
    """The chunk rows with their document's columns, as they were before `split`; only
    `columns` (those present) when given."""
    names = joined_names(chunks.schema, documents.schema)
    if columns is not None:
        names = [name for name in names if name in columns]
    from_documents = [n for n in names if n not in chunks.column_names]
    if from_documents:
        rows = chunks.column(DOCUMENT_ROW_COLUMN)
        taken = documents.select(from_documents).take(rows)
    arrays = [
        chunks.column(name) if name in chunks.column_names else taken.column(name) for name in names
    ]
    return pa.Table.from_arrays(arrays, names=names) if names else chunks.select([])
