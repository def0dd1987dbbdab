"""The encode stage: a batch of corpus rows in, a part (ids, vectors, metadata) out.

`encode_part` depends on nothing but its arguments, so the same stage can run in a build,
in an `add`, on a GPU worker or on a cluster node, in any order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from semsearch.corpus import text_hashes
from semsearch.errors import SemsearchError
from semsearch.index.segment import ID_COLUMN, RESERVED_COLUMNS, TEXT_HASH_COLUMN


@dataclass(frozen=True)
class EncodedPart:
    """Rows ready to be written as a part: their ids, vectors and metadata, in id order."""

    ids: np.ndarray
    vectors: np.ndarray
    metadata: pa.Table

    def __len__(self) -> int:
        return len(self.ids)


def part_metadata(rows: pa.Table | pa.RecordBatch, ids: np.ndarray, text_column: str) -> pa.Table:
    """The rows' own columns plus `_id` and `_text_hash`."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    clashing = [name for name in RESERVED_COLUMNS if name in table.column_names]
    if clashing:
        raise SemsearchError(
            f"the corpus has a column named {clashing[0]!r}, which semsearch reserves: rename it"
        )
    table = table.append_column(ID_COLUMN, pa.array(ids, pa.int64()))
    return table.append_column(TEXT_HASH_COLUMN, pa.array(text_hashes(table.column(text_column))))


def encode_part(
    encoder, rows: pa.Table | pa.RecordBatch, ids: np.ndarray, text_column: str,
    batch_size: int | None = None,
) -> EncodedPart:  # fmt: skip
    """Encode the texts of `rows` (which get `ids`) into a part sorted by id."""
    order = np.argsort(ids, kind="stable")
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    table = table.take(pa.array(order)) if not np.all(order == np.arange(len(order))) else table
    ids = np.asarray(ids, dtype=np.int64)[order]
    texts = table.column(text_column).to_pylist()
    vectors = (
        encoder.encode(texts, batch_size=batch_size)
        if texts
        else np.empty((0, encoder.dimension), np.float32)
    )
    return EncodedPart(ids, vectors, part_metadata(table, ids, text_column))
