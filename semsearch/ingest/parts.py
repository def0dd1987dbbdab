"""The one encode-parts path: parts of rows in, each part's vectors and metadata written.

A build (one stream or many files), an add and a Ray actor all call `encode_parts`: each
part is prepared (sorted by id, texts hashed), tokenised, encoded (or its own vectors read)
and written, the stages overlapped (`semsearch.ingest.pipeline`). A part depends on nothing
but its rows and ids, so it can be encoded anywhere, in any order. A build saves each
part's vectors every few thousand texts as they are encoded (`semsearch.ingest.saved_slices`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
from tqdm.auto import tqdm

from semsearch.errors import SemsearchError
from semsearch.ingest.build_options import DEFAULT_PART_ROWS
from semsearch.ingest.pipeline import DEFAULT_DEPTH, Pipeline
from semsearch.ingest.saved_slices import SAVE_EVERY, SavedSlices, encode_in_slices
from semsearch.io.corpus import text_hashes
from semsearch.io.own_vectors import VectorColumn, vector_hashes
from semsearch.models.encoder import Encoder, TokenizedTexts
from semsearch.models.prompts import document_prompt, with_prompt
from semsearch.phases import phase
from semsearch.store.segment import ID_COLUMN, RESERVED_COLUMNS, TEXT_HASH_COLUMN, SegmentWriter

# How much an encoding bar's rate (and ETA) follows its last refresh, a tenth of a second
# apart: tqdm's 0.3 swung the ETA with every batch of long or short texts and every part's
# hand-over; 0.05 averages over the last few seconds.
RATE_SMOOTHING = 0.05


@dataclass(frozen=True)
class RowPart:
    """A part as read: its usable rows and their ids (row numbers in the input)."""

    part: int
    batch: pa.Table | pa.RecordBatch
    ids: np.ndarray


def sliced_parts(
    rows: pa.Table, ids: np.ndarray, part_rows: int = DEFAULT_PART_ROWS
) -> Iterator[RowPart]:
    """`rows` cut every `part_rows` rows into parts numbered from 0: an add's new segment."""
    for part, start in enumerate(range(0, rows.num_rows, part_rows)):
        yield RowPart(part, rows.slice(start, part_rows), ids[start : start + part_rows])


def part_metadata(
    rows: pa.Table | pa.RecordBatch,
    ids: np.ndarray,
    text_column: str | None,
    hashes: np.ndarray | None = None,
) -> pa.Table:
    """The rows' own columns plus `_id` and `_text_hash` (the texts' hashes unless `hashes`
    are given: those of your own vectors, `own_vectors.vector_hashes`)."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    clashing = [name for name in RESERVED_COLUMNS if name in table.column_names]
    if clashing:
        raise SemsearchError(
            f"the corpus has a column named {clashing[0]!r}, which semsearch reserves: rename it"
        )
    table = table.append_column(ID_COLUMN, pa.array(ids, pa.int64()))
    if hashes is None:
        hashes = text_hashes(table.column(text_column))
    return table.append_column(TEXT_HASH_COLUMN, pa.array(hashes, pa.int64()))


@dataclass(frozen=True)
class PartRows:
    """A part read and prepared (sorted by id, texts hashed), waiting for its vectors.

    Its `texts` become `TokenizedTexts` once the tokenise stage has run (for an encoder
    with a `tokenize` of its own). `vectors`: the rows' own, from a vector column; the
    encode stage then passes them on instead of encoding the texts.
    """

    part: int
    ids: np.ndarray
    texts: list[str]
    metadata: pa.Table
    vectors: np.ndarray | None = None


def prepare_part(
    part: int,
    rows: pa.Table | pa.RecordBatch,
    ids: np.ndarray,
    text_column: str | None,
    vector_column: VectorColumn | None = None,
) -> PartRows:
    """The read stage's work on one part: rows sorted by id, their texts and metadata (and,
    with `vector_column`, their own vectors, checked and taken out of the metadata)."""
    order = np.argsort(ids, kind="stable")
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    table = table.take(pa.array(order)) if not np.all(order == np.arange(len(order))) else table
    ids = np.asarray(ids, dtype=np.int64)[order]
    if vector_column is None:
        texts = table.column(text_column).to_pylist()
        return PartRows(part, ids, texts, part_metadata(table, ids, text_column))
    vectors = vector_column.vectors(table)
    table = table.drop_columns([vector_column.name])
    own = text_hashes(table.column(text_column)) if text_column is not None else None
    metadata = part_metadata(table, ids, text_column, vector_hashes(vectors, own))
    return PartRows(part, ids, [], metadata, vectors)


def tokenise_part(encoder: Encoder, rows: PartRows) -> PartRows:
    """The tokenise stage: the texts with their token ids (of the texts after the encoder's
    document prompt); rows that bring their own vectors pass as they are."""
    if not rows.texts or rows.vectors is not None:
        return rows
    prompted = with_prompt(rows.texts, document_prompt(encoder))
    return replace(rows, texts=TokenizedTexts(rows.texts, encoder.tokenize(prompted)))


def encode_rows(
    encoder,
    rows: PartRows,
    batch_size: int | None,
    progress: Callable[[int], None],
    saved: SavedSlices | None = None,
) -> PartRows:
    """The encode stage: vectors for a prepared part (its own, when it brought them), each
    text after the encoder's document prompt; `progress` hears of each encoded batch. With
    `saved`, the part is encoded in slices, each saved as it finishes, and the slices an
    interrupted run saved are not encoded again."""
    if rows.vectors is not None:
        progress(len(rows.vectors))
        return rows
    if not rows.texts:
        return replace(rows, vectors=np.empty((0, encoder.dimension), np.float32))
    if isinstance(rows.texts, TokenizedTexts):  # a BiEncoder: it reports every batch

        def encode(texts):
            return encoder.encode(texts, batch_size=batch_size, progress=progress)

    else:  # any other encoder of texts: progress moves once per call
        prompt = document_prompt(encoder)

        def encode(texts):
            vectors = encoder.encode(with_prompt(list(texts), prompt), batch_size=batch_size)
            progress(len(texts))
            return vectors

    if saved is None:
        return replace(rows, vectors=encode(rows.texts))
    slice_rows = max(SAVE_EVERY, batch_size or 0)  # a batch is never cut to save
    vectors = encode_in_slices(encode, rows.texts, encoder.dimension, saved, slice_rows)
    return replace(rows, vectors=vectors)


def encode_parts(
    encoder,
    parts: Iterable[RowPart],
    writer: SegmentWriter,
    text_column: str | None,
    vector_column: VectorColumn | None = None,
    batch_size: int | None = None,
    show_progress: bool = False,
    total: int | None = None,
    initial: int = 0,
    depth: int = DEFAULT_DEPTH,
    save_slices: bool = False,
) -> None:
    """Prepare, encode and write `parts` (with `vector_column`, the rows' own vectors instead),
    the stages overlapped; the bar starts at `initial` (a resumed build's rows) and moves with
    every encoded batch. `save_slices` (a build's) saves each part's vectors as they are
    encoded, in the writer's folder, until the part is written."""
    own = vector_column is not None
    bar = tqdm(
        total=total,
        initial=initial,
        desc="reading vectors" if own else "encoding",
        unit="row" if own else "text",
        disable=not show_progress,
        smoothing=RATE_SMOOTHING,
    )
    pipeline = Pipeline(depth)

    def advance(rows: int) -> None:
        pipeline.check()  # another stage failed: stop within a batch
        bar.update(rows)

    def saved(part: int) -> SavedSlices | None:
        return SavedSlices.of_part(writer.folder, part) if save_slices and not own else None

    def write(encoded: PartRows) -> None:
        writer.write(encoded.part, encoded.ids, encoded.vectors, encoded.metadata)
        if save_slices and not own:
            SavedSlices.of_part(writer.folder, encoded.part).clear()  # the part holds them

    def prepare(rows: RowPart) -> PartRows:
        with phase("prepare"):  # sorted by id, texts (or own vectors) hashed
            return prepare_part(rows.part, rows.batch, rows.ids, text_column, vector_column)

    def prepared() -> Iterator[PartRows | RowPart]:  # read in the pipeline's read stage
        for rows in parts:
            # Own vectors are prepared in the tokenise stage, which has nothing else to do:
            # hashing them (GIL-bound BLAKE2b) then runs beside the next part's decoding.
            yield rows if own else prepare(rows)

    def tokenise(rows: PartRows | RowPart) -> PartRows:
        return prepare(rows) if own else tokenise_part(encoder, rows)

    with bar:
        pipeline.run(
            prepared(),
            tokenise,
            lambda rows: encode_rows(encoder, rows, batch_size, advance, saved(rows.part)),
            write,
        )
