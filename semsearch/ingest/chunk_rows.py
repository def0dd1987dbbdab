"""Documents into chunk rows: each long text cut into overlapping chunks, one row each, that
carries its document's id, its number, its character offsets and the document's columns.

Why rows and not a second table: every stage after this one (parts, encoding, the store,
add/delete, verify, compact, the Ray workers) already works on rows, so a chunk is simply a
row whose id is `<document id>#<n>`. Search groups them back into documents
(`semsearch.search.grouping`). The document's other columns come with each of its chunks
here; the store keeps them once per document (`semsearch.store.documents`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semsearch.errors import SemsearchError
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.chunking import Chunker
from semsearch.ingest.corpus_files import open_stream
from semsearch.ingest.rows import LiveRows
from semsearch.io.corpus import (
    ColumnScan,
    check_corpus,
    check_id_column,
    is_many_files,
    open_corpus,
    scan_columns,
)
from semsearch.io.documents import DOCUMENTS_FORMAT, is_document_folder, open_documents
from semsearch.models.model_folder import DEFAULT_MODEL, ModelFolder, resolve_model, token_window
from semsearch.store.manifest import (
    CHUNK_COLUMNS,
    CHUNK_END_COLUMN,
    CHUNK_ID_COLUMN,
    CHUNK_NUMBER_COLUMN,
    CHUNK_START_COLUMN,
    DOCUMENT_NUMBER_COLUMN,
    ChunkSpec,
    Manifest,
)
from semsearch.store.segment import Segment

log = logging.getLogger(__name__)

# A huge file comes as consecutive pieces of one document (`semsearch.io.documents`).
PIECE_START_COLUMN = "piece_start"
# Documents read at a time from the corpus: each may make dozens of chunks.
DOCUMENTS_PER_BATCH = 256
# Chunk spans kept between a build's two passes, of texts cut in several (at most about 75
# bytes a chunk: 16 and a small array per text); a text that fits is not cut again anyway.
SPANS_KEPT = 2_000_000


def model_window(model: ModelFolder) -> tuple[Path, int]:
    """The model's tokenizer file and its window in tokens (special tokens included), or a
    one-line error where it has none to chunk by (a word-vector model)."""
    tokenizer_file = model.transformer_path / "tokenizer.json"
    if model.word_model or not tokenizer_file.is_file():
        raise SemsearchError(
            f"model {model.name!r} has no tokenizer.json (a fast Hugging Face tokenizer) to cut "
            "texts into chunks by: build with --chunking off"
        )
    return tokenizer_file, token_window(model)


def chunker_for(model: ModelFolder, tokens: int | None, overlap: int, markdown: bool) -> Chunker:
    tokenizer_file, window = model_window(model)
    return Chunker(tokenizer_file, window, tokens=tokens, overlap=overlap, markdown=markdown)


def any_text_needs_chunking(
    batches: Iterator[pa.RecordBatch], text_column: str, chunker: Chunker
) -> bool:
    """Whether any text is longer than the window: `--chunking auto` chunks only then, so a
    corpus of short texts builds exactly as before. Only texts whose length in characters
    could exceed the window are tokenised."""
    for batch in batches:
        texts = batch.column(text_column)
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            return False
        lengths = pc.fill_null(pc.utf8_length(texts), 0)
        candidates = pc.filter(texts, pc.greater(lengths, chunker.shortest_long_text - 1))
        if any(chunker.exceeds_window(text) for text in candidates.to_pylist()):
            return True
    return False


def check_no_reserved(schema: pa.Schema, source: str) -> None:
    clashing = [name for name in CHUNK_COLUMNS if name in schema.names]
    if clashing:
        raise SemsearchError(
            f"{source} has a column named {clashing[0]!r}, which a chunked index uses for each "
            "chunk: rename it, or build with --chunking off"
        )


@dataclass
class ChunkedCorpus:
    """A corpus whose batches are the chunk rows of `corpus`'s documents, in order: the build
    and `add` read it as they read any corpus."""

    corpus: object  # semsearch.io.corpus.Corpus or semsearch.io.documents.DocumentFolder
    chunker: Chunker
    text_column: str
    document_column: str | None  # None: documents are numbered by their row
    _next_number: dict = field(default_factory=dict)
    # Each row's spans, kept from the first pass (the build counts the rows, then encodes
    # them): the second pass does not cut the texts again. Bounded by SPANS_KEPT chunks.
    _spans: dict[int, np.ndarray] = field(default_factory=dict)
    _spans_kept: int = 0
    # The input's rows (documents; a huge file's pieces count once) the last pass read: what
    # a build records as its rows read, not the chunk rows it made of them.
    documents_read: int = 0

    @property
    def path(self):
        return self.corpus.path

    @property
    def format(self) -> str:
        return self.corpus.format

    @property
    def num_rows(self) -> int | None:
        return None  # known once chunked

    @property
    def schema(self) -> pa.Schema:
        fields = [f for f in self.corpus.schema if f.name != PIECE_START_COLUMN]
        if self.document_column is None:
            fields.insert(0, pa.field(DOCUMENT_NUMBER_COLUMN, pa.int64()))
        return pa.schema(
            [
                pa.field(CHUNK_ID_COLUMN, pa.string()),
                *fields,
                pa.field(CHUNK_NUMBER_COLUMN, pa.int32()),
                pa.field(CHUNK_START_COLUMN, pa.int64()),
                pa.field(CHUNK_END_COLUMN, pa.int64()),
            ]
        )

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def spec(self) -> ChunkSpec:
        return ChunkSpec(
            tokens=self.chunker.tokens,
            overlap=self.chunker.overlap,
            document_column=self.document_column or DOCUMENT_NUMBER_COLUMN,
            splitter=self.chunker.splitter,
        )

    def batches(
        self, rows: int = 8192, columns: list[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Chunk rows in batches of at most `rows`; `columns` selects among them."""
        first_row = 0
        self._next_number = {}
        self.documents_read = 0
        for batch in self.corpus.batches(min(rows, DOCUMENTS_PER_BATCH)):
            table = self._chunk(batch, first_row)
            first_row += batch.num_rows
            self.documents_read += _documents_in(batch)
            if columns is not None:
                table = table.select(columns)
            yield from table.to_batches(max_chunksize=rows)

    def _spans_of(self, row: int, text: str | None) -> list[tuple[int, int]]:
        kept = self._spans.get(row)
        if kept is not None:
            return [tuple(span) for span in kept.tolist()]
        # A blank text is one blank chunk row, skipped and counted as one blank document.
        spans = (self.chunker.spans(text) if text and text.strip() else []) or [(0, 0)]
        if len(spans) > 1 and self._spans_kept + len(spans) <= SPANS_KEPT:  # a text cut
            self._spans[row] = np.array(spans, dtype=np.int64)
            self._spans_kept += len(spans)
        return spans

    def _chunk(self, batch: pa.RecordBatch, first_row: int) -> pa.Table:
        names = [name for name in batch.schema.names if name != PIECE_START_COLUMN]
        texts = batch.column(self.text_column).to_pylist()
        pieces = (
            batch.column(PIECE_START_COLUMN).to_pylist()
            if PIECE_START_COLUMN in batch.schema.names
            else [0] * batch.num_rows
        )
        if self.document_column is None:
            documents = list(range(first_row, first_row + batch.num_rows))
        else:
            documents = batch.column(self.document_column).to_pylist()
        take, chunk_ids, numbers, starts, ends, chunk_texts = [], [], [], [], [], []
        for row, (text, document, piece_start) in enumerate(zip(texts, documents, pieces)):
            spans = self._spans_of(first_row + row, text)
            number = self._next_number.get(document, 0) if piece_start else 0
            for start, end in spans:
                take.append(row)
                chunk_ids.append(f"{document}#{number}")
                numbers.append(number)
                starts.append(piece_start + start)
                ends.append(piece_start + end)
                chunk_texts.append(text[start:end] if text else text)
                number += 1
            self._next_number = {document: number}  # only a document's next piece continues it
        # The document's other columns repeat on each chunk; its text is not taken with them
        # (a piece of a MiB copied once a chunk would be gigabytes), each chunk gets its own.
        others = [name for name in names if name != self.text_column]
        text_type = batch.schema.field(self.text_column).type
        table = pa.table({self.text_column: pa.array(chunk_texts, text_type)})
        if others:
            table = (
                pa.Table.from_batches([batch])
                .select(others)
                .take(pa.array(take, pa.int64()))
                .add_column(names.index(self.text_column), self.text_column, table.column(0))
            )
        if self.document_column is None:
            table = table.add_column(
                0, DOCUMENT_NUMBER_COLUMN, pa.array([documents[row] for row in take], pa.int64())
            )
        table = table.add_column(0, CHUNK_ID_COLUMN, pa.array(chunk_ids, pa.string()))
        table = table.append_column(CHUNK_NUMBER_COLUMN, pa.array(numbers, pa.int32()))
        table = table.append_column(CHUNK_START_COLUMN, pa.array(starts, pa.int64()))
        return table.append_column(CHUNK_END_COLUMN, pa.array(ends, pa.int64()))


def _documents_in(batch: pa.RecordBatch) -> int:
    """The documents a batch of the input starts: its rows, but a huge file's later pieces."""
    if PIECE_START_COLUMN not in batch.schema.names:
        return batch.num_rows
    return int(pc.sum(pc.equal(batch.column(PIECE_START_COLUMN), 0)).as_py() or 0)


def check_documents(
    corpus, text_column: str | None, id_column: str | None, strict: bool = False
) -> ColumnScan:
    """What build and add check of a corpus before encoding it (`io.corpus.check_corpus`), in
    the user's terms whatever the chunking: a chunked corpus' ids are checked on its
    documents (the user's id column, rows numbered as in the input), its texts on its
    chunk rows. `id_column` is the user's."""
    if not isinstance(corpus, ChunkedCorpus):
        return check_corpus(corpus, text_column, id_column, strict)
    # A folder's documents are its files: their ids, relative paths, are unique, and an
    # empty one is skipped as it is read.
    if corpus.format != DOCUMENTS_FORMAT:
        if id_column is not None:
            check_id_column(corpus.corpus, id_column)
        if strict:  # a blank text is named by its row in the input, not by its chunk row
            scan_columns(corpus.corpus, text_column, None, strict)
    return check_corpus(corpus, text_column, None, strict)


def stored_documents(segment: Segment, column: str) -> int:
    """How many documents a chunked segment's stored chunk rows belong to, read from their
    document column alone (it is kept on the chunk rows: no text read, no join)."""
    import pyarrow.parquet as pq

    tables = [pq.read_table(path, columns=[column]) for path in segment.metadata_paths()]
    if not tables:
        return 0
    return int(pc.count_distinct(pa.concat_tables(tables).column(column)).as_py())


def document_of(chunk_id: str) -> str:
    """The document id a chunk's id names (`<document id>#<n>`)."""
    return chunk_id.rpartition("#")[0]


def plan_chunks(corpus, options: BuildOptions) -> tuple[object, BuildOptions, ChunkSpec | None]:
    """Apply `--chunking` to a build's corpus: the corpus to read (its chunk rows, or itself),
    the options to build with (a chunked index's row id is the chunk's), and what the
    manifest records (None: one row per text, exactly as an unchunked build)."""
    if options.chunking == "off":
        return corpus, options, None
    if options.vector_column is not None or options.text_column is None:
        if options.chunking == "on":
            raise SemsearchError(
                "--chunking on cuts texts for a model to encode; your own vectors are one per "
                "row: leave --chunking out"
            )
        return corpus, options, None
    model = resolve_model(options.model or DEFAULT_MODEL)
    if model.word_model and options.chunking == "auto":
        return corpus, options, None
    chunker = chunker_for(
        model,
        options.chunk_tokens,
        options.chunk_overlap,
        markdown=corpus.format == DOCUMENTS_FORMAT,
    )
    source = Path(str(corpus.path)).name
    if options.chunking == "auto":
        texts = corpus.batches(DOCUMENTS_PER_BATCH, columns=[options.text_column])
        if not any_text_needs_chunking(texts, options.text_column, chunker):
            return corpus, options, None
        log.info("some texts of %s are longer than the model's window: chunking them", source)
    check_no_reserved(corpus.schema, source)
    chunked = ChunkedCorpus(corpus, chunker, options.text_column, options.id_column)
    return chunked, replace(options, id_column=CHUNK_ID_COLUMN), chunked.spec()


def open_rows_for(manifest: Manifest, location) -> object:
    """The rows an `add` reads from `location` for this index: a folder of documents or a
    corpus file, cut into chunks as the index's were (same model, sizes and overlap)."""
    chunks = manifest.chunks
    if is_document_folder(location):
        corpus = open_documents(location)
    elif chunks is not None and is_many_files(location):
        corpus = open_stream(location)  # a chunked index's rows: the files as one stream
    else:
        corpus = open_corpus(location)
    if chunks is None:
        return corpus
    if manifest.id_column is None:
        # The rows' numbers in another file would name the index's documents of those
        # numbers: the add would replace them.
        raise SemsearchError(
            f"index {manifest.name!r} numbers its documents by row (it was built without "
            "--id-column), so added rows cannot be told from its own: rebuild it with an "
            "--id-column to add to it"
        )
    text_column = manifest.text_column
    if text_column not in corpus.schema.names:
        return corpus  # the column checks that follow say what is missing
    markdown = corpus.format == DOCUMENTS_FORMAT
    chunker = chunker_for(
        resolve_model(manifest.model.name), chunks.tokens, chunks.overlap, markdown
    )
    check_no_reserved(corpus.schema, Path(str(corpus.path)).name)
    return ChunkedCorpus(corpus, chunker, text_column, manifest.id_column)


def stale_chunks(live: LiveRows, rows: pa.Table) -> np.ndarray:
    """The live rows of the documents in `rows` whose chunk ids `rows` no longer has: the
    tail of a document that became shorter."""
    incoming = rows.column(CHUNK_ID_COLUMN).to_pylist()
    documents = {document_of(chunk_id) for chunk_id in incoming}
    keep = set(incoming)
    stored = live.key_column().to_pylist()
    return np.array(
        [
            row
            for row in np.flatnonzero(live.live).tolist()
            if stored[row] not in keep and document_of(stored[row]) in documents
        ],
        dtype=np.int64,
    )


def document_rows(live: LiveRows, documents: list[str]) -> tuple[np.ndarray, int]:
    """The live rows of these documents (all their chunks), and how many documents have none."""
    wanted = set(documents)
    stored = live.key_column().to_pylist()
    rows = [row for row in np.flatnonzero(live.live).tolist() if document_of(stored[row]) in wanted]
    found = {document_of(stored[row]) for row in rows}
    return np.array(rows, dtype=np.int64), len(wanted - found)
