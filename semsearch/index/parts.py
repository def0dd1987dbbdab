"""The encode stage: a batch of corpus rows in, a part (ids, vectors, metadata) out.

`encode_part` depends on nothing but its arguments, so the same stage can run in a build,
in an `add`, on a GPU worker or on a cluster node, in any order. `write_parts` runs its
steps (prepare, tokenise, encode, write) as overlapped stages over many parts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from semsearch.corpus import text_hashes
from semsearch.errors import SemsearchError
from semsearch.index.pipeline import DEFAULT_DEPTH, Pipeline
from semsearch.index.segment import ID_COLUMN, RESERVED_COLUMNS, TEXT_HASH_COLUMN, SegmentWriter
from semsearch.models.tokenized import TokenizedTexts


@dataclass(frozen=True)
class EncodedPart:
    """Rows ready to be written as a part: their ids, vectors and metadata, in id order."""

    ids: np.ndarray
    vectors: np.ndarray
    metadata: pa.Table
    part: int = 0  # its number in the segment

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


@dataclass(frozen=True)
class PartRows:
    """A part read and prepared (sorted by id, texts hashed), waiting for its vectors.

    Its `texts` become `TokenizedTexts` once the tokenise stage has run (for an encoder
    with a `tokenize` of its own).
    """

    part: int
    ids: np.ndarray
    texts: list[str]
    metadata: pa.Table


def prepare_part(
    part: int, rows: pa.Table | pa.RecordBatch, ids: np.ndarray, text_column: str
) -> PartRows:
    """The read stage's work on one part: rows sorted by id, their texts and metadata."""
    order = np.argsort(ids, kind="stable")
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    table = table.take(pa.array(order)) if not np.all(order == np.arange(len(order))) else table
    ids = np.asarray(ids, dtype=np.int64)[order]
    texts = table.column(text_column).to_pylist()
    return PartRows(part, ids, texts, part_metadata(table, ids, text_column))


def tokenise_part(encoder, rows: PartRows) -> PartRows:
    """The tokenise stage: the texts with their token ids, for an encoder that tokenises."""
    tokenize = getattr(encoder, "tokenize", None)
    if not callable(tokenize) or not rows.texts:
        return rows
    return replace(rows, texts=TokenizedTexts(rows.texts, tokenize(rows.texts)))


def encode_rows(
    encoder, rows: PartRows, batch_size: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> EncodedPart:  # fmt: skip
    """The encode stage: vectors for a prepared part; `progress` hears of each encoded batch."""
    if not rows.texts:
        vectors = np.empty((0, encoder.dimension), np.float32)
    elif isinstance(rows.texts, TokenizedTexts):  # a BiEncoder: it reports every batch
        vectors = encoder.encode(rows.texts, batch_size=batch_size, progress=progress)
    else:  # any other encoder of texts: progress moves once per part
        vectors = encoder.encode(rows.texts, batch_size=batch_size)
        if progress is not None:
            progress(len(rows.texts))
    return EncodedPart(rows.ids, vectors, rows.metadata, rows.part)


def encode_part(
    encoder, rows: pa.Table | pa.RecordBatch, ids: np.ndarray, text_column: str,
    batch_size: int | None = None,
) -> EncodedPart:  # fmt: skip
    """Encode the texts of `rows` (which get `ids`) into a part sorted by id."""
    return encode_rows(encoder, prepare_part(0, rows, ids, text_column), batch_size)


def write_parts(
    encoder, parts: Iterable[PartRows], writer: SegmentWriter, batch_size: int | None = None,
    progress: Callable[[int], None] | None = None, depth: int = DEFAULT_DEPTH,
) -> None:  # fmt: skip
    """Encode and write `parts`, with reading, tokenising, encoding and writing overlapped
    (`semsearch.index.pipeline`); `progress` hears of every encoded batch."""
    pipeline = Pipeline(depth)

    def advance(rows: int) -> None:
        pipeline.check()  # another stage failed: stop within a batch
        if progress is not None:
            progress(rows)

    def write(encoded: EncodedPart) -> None:
        writer.write(encoded.part, encoded.ids, encoded.vectors, encoded.metadata)

    pipeline.run(
        parts,
        functools.partial(tokenise_part, encoder),
        lambda rows: encode_rows(encoder, rows, batch_size, advance),
        write,
    )
