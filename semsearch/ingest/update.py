"""`add` (upsert by id) and `delete` (by id or by filter): each writes one new generation.

An add writes its rows as a new segment (vectors, metadata and a small FAISS index of its
own; IVF segments start from the index's trained centroids), and marks the rows it
replaces as deleted in the segments that held them. Its cost grows with the rows added,
not with the index. Unchanged rows (same id, same text hash) are skipped without encoding.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pyarrow as pa

from semsearch import phases
from semsearch.ann.devices import FaissDevice, device_words, faiss_device
from semsearch.ann.vector_index import VectorIndex
from semsearch.disk import check_free_space, commit
from semsearch.errors import SemsearchError
from semsearch.ingest.build import index_segment
from semsearch.ingest.build_options import check_batch_size
from semsearch.ingest.change_counts import ChangeResult, documents_changed
from semsearch.ingest.chunk_rows import check_documents, document_rows, open_rows_for, stale_chunks
from semsearch.ingest.conform import Target, conform, rename_text_column
from semsearch.ingest.parts import encode_parts, sliced_parts
from semsearch.ingest.rows import LiveRows, matched_rows
from semsearch.io.corpus import check_ids, text_hashes, usable_rows
from semsearch.io.own_vectors import VectorColumn, check_vector_type, vector_hashes
from semsearch.models.encoder import Encoder
from semsearch.models.prompts import check_document_prompt
from semsearch.models.query_loader import open_for_rows
from semsearch.phases import phase
from semsearch.search.searcher import check_same_model
from semsearch.search.where import WhereEvaluator
from semsearch.store.file_checks import check_file, check_opened_files
from semsearch.store.folders import IndexFolder
from semsearch.store.generation import (
    next_generation,
    next_segment_number,
    segment_name,
    timed_record,
)
from semsearch.store.held_out import warn_when_drifted
from semsearch.store.manifest import TRAINED_DIR, Manifest, SegmentRecord, write_manifest
from semsearch.store.segment import (
    ID_COLUMN,
    Segment,
    SegmentWriter,
    document_split,
    internal_columns,
    segment_bytes,
    write_deleted,
)

log = logging.getLogger(__name__)

# Encodes rows (sorted by id) with their ids into the parts written by the writer;
# `add_rows` does it in this process unless given one (`semsearch.distributed`).
PartsWriter = Callable[[SegmentWriter, pa.Table, np.ndarray], None]


def add_rows(
    folder: IndexFolder,
    corpus_path,
    encoder: Encoder | None = None,
    text_column: str | None = None,
    id_column: str | None = None,
    batch_size: int | None = None,
    write_parts: PartsWriter | None = None,
    device: str = "auto",
    convert_types: bool = False,
    show_progress: bool = False,
    runtime: str = "auto",
) -> ChangeResult:
    """Upsert the rows of a corpus file into the index; see the module docstring. FAISS works
    on `device`. Without an `encoder`, the index's model is loaded (`open_for_rows`) only once
    some row needs encoding, so an add of unchanged rows loads none. The corpus is checked
    as `build` checks it, and its columns must hold the index's types
    (`semsearch.ingest.conform`; `convert_types` reads others that convert without loss)."""
    check_batch_size(batch_size)  # before the lock, the corpus and the model
    with phases.timing() as timer, folder.writer_lock("add"):
        with phase("read"):  # the index's files checked, the new rows read and checked
            manifest = folder.manifest()
            check_opened_files(folder, manifest)  # never build a generation on changed files
            text_column, id_column = _columns(manifest, text_column, id_column)
            corpus = open_rows_for(manifest, corpus_path)
            vector_column = own_vector_column(manifest, corpus, write_parts)
            check_documents(corpus, text_column, id_column)  # what build checks, the same way
            table, skipped = _read_usable(corpus, text_column)
        with phase("match"):  # the new rows matched with the live ones by id and hash
            live = LiveRows.read(folder, manifest)
            target = Target(manifest.name, live.schema(), manifest.text_column, manifest.key_column)
            table, hashes = _conformed(
                table, target, corpus, text_column, vector_column, convert_types
            )
            existing, unchanged = matched_rows(live, table, hashes, target)
            # A changed document's chunks beyond its new count go with it, in one generation.
            stale = (
                stale_chunks(live, table) if manifest.chunks is not None else np.array([], np.int64)
            )
            documents = documents_changed(live, table, existing, unchanged, stale)
        if unchanged.all() and not len(stale):
            log.warning("nothing to add: all %d rows are already in the index", documents.total)
            return ChangeResult(
                None,
                unchanged=documents.counts["unchanged"],
                skipped_empty=skipped,
                chunks=documents.chunks(unchanged=int(unchanged.sum())),
            )
        todo = int((~unchanged).sum())
        index = manifest.index.factory
        needed = segment_bytes(todo, manifest.model.dimension, manifest.vector_dtype, index)
        check_free_space(folder.path, needed, f"adding {todo} rows")  # before any encoding
        placement = faiss_device(device)
        if vector_column is not None:
            encoder = None  # the rows bring their vectors
        else:
            with phase("load model"):
                encoder = _rows_encoder(
                    manifest, encoder, device, runtime, show_progress, ~unchanged
                )
        if write_parts is None:  # encoded here, the stages overlapped

            def write_parts(writer: SegmentWriter, rows: pa.Table, ids: np.ndarray) -> None:
                parts = sliced_parts(rows, ids)
                encode_parts(
                    encoder,
                    parts,
                    writer,
                    manifest.text_column,
                    vector_column,
                    batch_size,
                    show_progress,
                    total=rows.num_rows,
                )

        segments, counts = _added_segments(
            folder, live, table, existing, unchanged, stale, write_parts, placement
        )
        chunks = documents.chunks(**counts, deleted=len(stale))
        operation = {"kind": "add", "source": str(corpus.path), **documents.counts}
        operation.update({"chunks": chunks} if chunks else {})
        operation["runtime"] = None if encoder is None else encoder.runtime
        new_id = manifest.next_id + counts["added"]
        new = next_generation(manifest, segments, operation, 0.0, next_id=new_id, **documents.after)
        new = timed_record(folder.path, new, timer)
        write_manifest(folder.path, new)
        log.info("add to %s: %s", manifest.name, timer.report().line())
        warn_when_drifted(manifest.name, manifest.segments, new.segments)
        return ChangeResult(
            new.generation,
            **documents.counts,
            skipped_empty=skipped,
            chunks=chunks,
            phases=new.operation["phases"],
        )


def _added_segments(
    folder: IndexFolder,
    live: LiveRows,
    table: pa.Table,
    existing: np.ndarray,
    unchanged: np.ndarray,
    stale: np.ndarray,
    write_parts: PartsWriter,
    device: FaissDevice,
) -> tuple[list[SegmentRecord], dict[str, int]]:
    """The next generation's segments: the changed and new rows written as a new segment (a
    replaced row keeps its id, a new one takes the next), the rows they replace deleted;
    and the rows added, replaced and unchanged."""
    manifest = live.manifest
    old_ids = live.table.column(ID_COLUMN).to_numpy()
    ids = np.where(existing >= 0, old_ids[np.maximum(existing, 0)], -1)
    fresh = existing < 0
    ids[fresh] = manifest.next_id + np.arange(int(fresh.sum()))
    todo = ~unchanged
    record = _write_segment(
        folder, manifest, table.filter(pa.array(todo)), ids[todo], write_parts, device
    )
    replaced = (existing >= 0) & ~unchanged
    with phase("delete"):
        deletions = live.deleted_by_segment(np.concatenate([existing[replaced], stale]))
        kept = _with_deletions(folder, manifest, deletions)
    counts = {"added": int(fresh.sum()), "replaced": int(replaced.sum())}
    counts["unchanged"] = int(unchanged.sum())
    return kept + [record], counts


def _conformed(
    table: pa.Table,
    target: Target,
    corpus,
    text_column: str | None,
    vector_column: VectorColumn | None,
    convert_types: bool,
) -> tuple[pa.Table, np.ndarray | None]:
    """The new rows with the index's column names and types (`semsearch.ingest.conform`),
    and each row's hash: its text's, and its own vector's for an index of your own vectors."""
    if text_column is not None:
        table = rename_text_column(table, text_column, target, corpus.path.name)
    own = table.column(vector_column.name) if vector_column is not None else None
    if own is not None:  # checked whole, before anything is written; not a metadata column
        own_vectors = vector_column.vectors(table)
        table = table.drop_columns([vector_column.name])
    table = conform(table, target, corpus.format, convert_types)
    id_column = target.id_column
    if id_column is not None and convert_types:  # "01" and "1" may both have become 1
        check_ids(corpus.path, id_column, [table.column(id_column).combine_chunks()])
    text = target.text_column
    hashes = text_hashes(table.column(text)) if text is not None else None
    if own is not None:
        hashes = vector_hashes(own_vectors, hashes)
        table = table.append_column(vector_column.name, own)
    return table, hashes


def _rows_encoder(
    manifest: Manifest,
    encoder: Encoder | None,
    device: str,
    runtime: str,
    show_progress: bool,
    todo: np.ndarray,
) -> Encoder:
    """The encoder given, or the index's model loaded to encode the `todo` rows; checked to
    be the index's model with its document prompt."""
    if encoder is None:
        if show_progress:  # seconds of silence otherwise
            log.warning(
                "loading model %s on %s to encode %d rows",
                manifest.model.name,
                device_words(device),
                int(todo.sum()),
            )
        encoder = open_for_rows(manifest.model, device, runtime)
    check_same_model(manifest, encoder)
    check_document_prompt(manifest.model.document_prompt, encoder, manifest.name)
    return encoder


def delete_rows(
    folder: IndexFolder, ids: list[str] | None = None, where: str | None = None
) -> ChangeResult:
    """Delete the live rows with these ids (the index's id column, or its row ids) or those
    satisfying `where`; they never come back from a query."""
    if (ids is None) == (where is None):
        raise SemsearchError("give either ids (--ids FILE) or a filter (--where EXPR), one of them")
    started = time.perf_counter()
    with folder.writer_lock("delete"):
        manifest = folder.manifest()
        check_opened_files(folder, manifest)  # never build a generation on changed files
        if ids is not None and not ids:
            raise SemsearchError("no ids to delete: give one id per line")
        live = LiveRows.read(folder, manifest)
        if where is not None:
            parts = [files for segment in live.segments for files in segment.metadata_files()]
            evaluator = WhereEvaluator(parts, len(live.live), internal_columns(manifest))
            rows = np.flatnonzero(evaluator.mask(where) & live.live)
            not_found = 0
        else:
            if manifest.chunks is not None:  # a document's id deletes all its chunks
                rows, not_found = document_rows(live, ids)
            else:
                found = live.find(pa.array(ids))
                rows = np.unique(found[found >= 0])
                not_found = int(np.sum(found < 0))
            if not_found:
                log.warning(
                    "%d of the %d ids are not in the index (or were deleted before)",
                    not_found,
                    len(ids),
                )
        if len(rows) == 0:
            return ChangeResult(None, not_found=not_found)
        segments = _with_deletions(folder, manifest, live.deleted_by_segment(rows))
        deleted, after, chunks = len(rows), {}, None
        if manifest.chunks is not None:  # in documents: those left without a live chunk
            after = {"documents": live.document_count(dropped=rows)}
            deleted, chunks = live.document_count() - after["documents"], {"deleted": len(rows)}
        operation = {"kind": "delete", "deleted": deleted, **({"chunks": chunks} if chunks else {})}
        new = next_generation(
            manifest,
            segments,
            {**operation, **({"where": where} if where else {})},
            time.perf_counter() - started,
            **after,
        )
        write_manifest(folder.path, new)
        warn_when_drifted(manifest.name, manifest.segments, new.segments)
        return ChangeResult(new.generation, deleted=deleted, not_found=not_found, chunks=chunks)


def _columns(
    manifest: Manifest, text_column: str | None, id_column: str | None
) -> tuple[str | None, str | None]:
    """The text column and the user's id column of the rows to add: the index's (an id
    column given must be the one the index was built with)."""
    if id_column is not None and id_column != manifest.id_column:
        built = repr(manifest.id_column) if manifest.id_column else "no id column"
        raise SemsearchError(
            f"index {manifest.name!r} was built with {built}, not {id_column!r}: rows are "
            "matched by the index's own id column, so leave --id-column out"
        )
    return text_column or manifest.text_column, manifest.id_column


def _read_usable(corpus, text_column: str | None) -> tuple[pa.Table, int]:
    """The corpus' rows with a text (all of them without a text column), and how many had
    none; refused where no row is left."""
    batches, skipped, first_row = [], 0, 0
    for batch in corpus.batches():
        rows = usable_rows(batch, text_column, first_row) if text_column is not None else None
        batches.append(batch if rows is None else rows.batch)
        skipped += 0 if rows is None else rows.skipped
        first_row += batch.num_rows
    if sum(batch.num_rows for batch in batches) == 0:
        raise SemsearchError(f"{corpus.path.name} has no rows with a {text_column!r} text to add")
    return pa.Table.from_batches(batches, corpus.schema if text_column is None else None), skipped


def _write_segment(
    folder: IndexFolder,
    manifest: Manifest,
    rows: pa.Table,
    ids: np.ndarray,
    write_parts: PartsWriter,
    device: FaissDevice,
) -> SegmentRecord:
    """Encode `rows` into a new segment with its own index; renamed into place when complete."""
    writer = new_segment(folder, manifest)
    order = np.argsort(ids, kind="stable")
    write_parts(writer, rows.take(pa.array(order)), ids[order])
    record, _, _ = index_segment(
        _empty_index(folder, manifest),
        manifest.index,
        written_segment(writer),
        manifest.generation + 1,
        manifest.lexical,  # the new rows' BM25 part, like their FAISS index
        manifest.text_column,
        device,
    )
    commit(writer.folder, folder.segment_dir(record.name))
    return record


def new_segment(folder: IndexFolder, manifest: Manifest) -> SegmentWriter:
    """A writer into the next segment's temporary folder (`.tmp-NAME`), which its maker
    renames into place once the segment is complete."""
    segments = folder.segments_dir
    existing = [path.name for path in segments.iterdir()] if segments.is_dir() else []
    temporary = segments / f".tmp-{segment_name(next_segment_number(manifest, existing))}"
    shutil.rmtree(temporary, ignore_errors=True)
    split = document_split(manifest.chunks, manifest.text_column)
    return SegmentWriter(temporary, manifest.vector_dtype, split)


def written_segment(writer: SegmentWriter) -> Segment:
    """The segment `new_segment`'s writer wrote, still in its temporary folder."""
    name = writer.folder.name.removeprefix(".tmp-")
    documents = writer.split is not None
    record = SegmentRecord(
        name, writer.rows_written(), writer.part_count(), "", 0, documents=documents
    )
    return Segment(writer.folder, record)


def own_vector_column(manifest: Manifest, corpus, write_parts) -> VectorColumn | None:
    """For an index of your own vectors, its vector column, checked in the new rows' corpus:
    an add brings vectors of the index's size in the column the build read them from."""
    column = manifest.source.vector_column
    if column is None:
        return None
    if write_parts is not None:
        raise SemsearchError(
            f"index {manifest.name!r} holds your own vectors: add to it in this process "
            "(without --engine ray)"
        )
    check_vector_type(corpus.schema, column, corpus.path.name)
    return VectorColumn(column, manifest.model.dimension, manifest.index.metric)


def _empty_index(folder: IndexFolder, manifest: Manifest) -> VectorIndex:
    """An empty index like the others: from the trained structure where there is one."""
    if manifest.index.trained_file:
        check_file(folder, manifest, f"{TRAINED_DIR}/{manifest.index.trained_file}")
        return VectorIndex.read(
            folder.trained_path(manifest.index.trained_file), manifest.index.metric
        )
    return VectorIndex.create(manifest.index, manifest.model.dimension)


def _with_deletions(
    folder: IndexFolder, manifest: Manifest, deletions: dict[int, np.ndarray]
) -> list[SegmentRecord]:
    """The generation's segment records with new deletion files where `deletions` says."""
    records = list(manifest.segments)
    for position, ids in deletions.items():
        record = records[position]
        name = write_deleted(folder.segment_dir(record.name), manifest.generation + 1, ids)
        records[position] = replace(record, deleted=len(ids), deleted_file=name)
    return records
