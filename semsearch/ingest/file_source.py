"""One corpus read as one stream and encoded part by part in this process: a build's
`PartSource` for a file, a folder of documents, or many files read one after the other.

The stream is re-cut into parts of exactly `part_rows` rows (`read_in_parts`), so part N
holds the same rows in every run and an interrupted build resumes by part; reading,
tokenising, encoding and writing are overlapped (`semsearch.ingest.parts.encode_parts`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pyarrow as pa

from semsearch import phases
from semsearch.ingest.build_options import BuildOptions, EncodedRows, counted_rows
from semsearch.ingest.chunk_rows import check_documents, plan_chunks
from semsearch.ingest.corpus_files import FileStream, ManyFilesSource, open_stream
from semsearch.ingest.parts import RowPart, encode_parts
from semsearch.io.corpus import (
    Corpus,
    RowFilter,
    UsableRows,
    check_id_column,
    open_corpus,
    rechunk,
    usable_rows,
)
from semsearch.io.documents import DOCUMENT_ID, DOCUMENT_TEXT, is_document_folder, open_documents
from semsearch.io.filesystems import is_uri, location_sha256, location_text
from semsearch.io.own_vectors import VectorColumn, dimension_of
from semsearch.models.truncation import truncation_report
from semsearch.store.folders import encoded_rows
from semsearch.store.manifest import SourceSpec
from semsearch.store.segment import SegmentWriter


class FilePartSource:
    """One corpus read as one stream, encoded part by part in this process: a file, a folder
    of documents, or many files read one after the other (`corpus`, for a chunked build)."""

    def __init__(self, options: BuildOptions, corpus: FileStream | None = None) -> None:
        if corpus is None and is_document_folder(options.corpus):  # a file a document
            corpus = open_documents(options.corpus, options.strict)
            options = replace(options, text_column=DOCUMENT_TEXT, id_column=DOCUMENT_ID)
        else:
            corpus = corpus or open_corpus(options.corpus)
            RowFilter(options.text_column, options.id_column).check_columns(corpus)
        self.name = corpus.path.name
        # What the build then reads (chunk rows, or the rows themselves), and with which id
        # (a chunk's own); the user's id column is what messages and the manifest name.
        self.corpus, self.options, self.chunks = plan_chunks(corpus, options)
        self.id_column = options.id_column
        self._documents = corpus
        self._sha256: str | None = None
        self._usable: int | None = None
        self.dimension: int | None = None  # of the vector column's vectors, once checked

    def usable_rows(self) -> int:
        """Count the rows with a text and check every vector, id and text before anything is
        written."""
        options = self.options
        if options.vector_column is None:
            self._usable = check_documents(
                self.corpus, options.text_column, self.id_column, options.strict
            ).usable
            return self._usable
        # Every vector checked, decoded beside the texts and ids (each read releases the GIL).
        column = options.vector_column
        vectors = phases.Background(
            lambda: dimension_of(self.corpus.batches(columns=[column]), column, self.name),
            "semsearch-scan-vectors",
        )
        try:
            if options.text_column is not None:
                usable = check_documents(
                    self.corpus, options.text_column, self.id_column, options.strict
                ).usable
            elif options.id_column is not None:
                check_id_column(self.corpus, options.id_column)
        finally:  # a bad vector is told first, as when the vectors were checked first
            self.dimension, rows = vectors.result()
        self._usable = rows if options.text_column is None else usable
        return self._usable

    def fingerprint(self) -> str:
        # Not hashed beside the scan: hashlib's 256 KiB reads take the GIL back 10,000 times
        # for 1.3 GB, and beside Python work on 2 busy cores that once took 25 s, not 1.
        if self._sha256 is None:
            documents = self._documents
            one_file = isinstance(documents, Corpus)
            self._sha256 = location_sha256(documents.path) if one_file else documents.fingerprint()
        return self._sha256

    def encode_parts(self, encoder, writer: SegmentWriter, options: BuildOptions) -> EncodedRows:
        """Encode the parts not written yet; a resumed build's bar starts at the rows its parts
        and saved slices hold already, so its rate and ETA count only the texts this run
        encodes."""
        counts = {"read": 0, "skipped": 0}
        own = options.vector_column
        vector_column = VectorColumn(own, self.dimension, options.metric) if own else None
        with truncation_report(encoder) as truncated:
            encode_parts(
                encoder,
                stream_parts(self.corpus, writer, options, counts),
                writer,
                options.text_column,
                vector_column,
                options.batch_size,
                options.show_progress,
                self._usable,
                encoded_rows(writer.folder),
                options.pipeline_depth,
                save_slices=True,
            )
        return counted_rows(counts["read"], counts["skipped"], truncated.cut, options.text_column)

    def source_spec(self, rows: EncodedRows, options: BuildOptions) -> SourceSpec:
        """The input's rows read and skipped (a chunked corpus': its documents; a blank one
        is one blank chunk row) and the user's id column."""
        path = self.corpus.path
        read = self.corpus.documents_read if self.chunks is not None else rows.read
        return SourceSpec(
            path=location_text(path) if is_uri(location_text(path)) else str(path.resolve()),
            format=self.corpus.format,
            sha256=self.fingerprint(),
            rows_read=read,
            rows_skipped=rows.skipped,
            text_column=options.text_column,
            id_column=self.id_column,
            vector_column=options.vector_column,
        )

    def operation(self) -> dict:
        return {}


def many_files_source(options: BuildOptions) -> FilePartSource | ManyFilesSource:
    """A folder or glob of table files: read file by file in parts (`ManyFilesSource`), or,
    where texts are to be cut into chunks, as one stream of chunk rows."""
    could_chunk = options.vector_column is None and options.text_column is not None
    if options.chunking == "off" or not could_chunk:
        return ManyFilesSource(options)
    streamed = FilePartSource(options, open_stream(options.corpus))
    return streamed if streamed.chunks is not None else ManyFilesSource(options)


def stream_parts(
    corpus: Corpus, writer: SegmentWriter, options: BuildOptions, counts: dict[str, int]
) -> Iterator[RowPart]:
    """The parts `writer` does not hold yet, each of its usable rows; `counts` gathers the rows
    read and skipped over every part, written or not."""
    for part, chunk in enumerate(read_in_parts(corpus, options.part_rows)):
        if options.text_column is None:  # your own vectors alone: every row is usable
            rows = UsableRows(chunk, counts["read"] + np.arange(chunk.num_rows), 0)
        else:
            rows = usable_rows(chunk, options.text_column, counts["read"], options.strict)
        counts["read"] += chunk.num_rows
        counts["skipped"] += rows.skipped
        if not writer.has(part):  # else written by the interrupted build this one resumes
            yield RowPart(part, rows.batch, rows.source_rows)


def read_in_parts(corpus: Corpus, rows_per_chunk: int) -> Iterator[pa.RecordBatch]:
    """The corpus re-cut into batches of exactly `rows_per_chunk` rows (the last may be short):
    part N holds the same rows in every run, so a build resumes by part."""
    return rechunk(corpus.batches(min(rows_per_chunk, 8192)), rows_per_chunk)
