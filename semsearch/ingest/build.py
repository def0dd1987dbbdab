"""`semsearch build`: read -> encode -> write parts -> index from the parts -> tune.

The build streams the corpus in record batches, encodes each batch of `part_rows` rows
and writes it as a part of the index's first segment (reading, tokenising, encoding and
writing overlapped: `semsearch.ingest.pipeline`), then trains the FAISS structure on a sample
of the stored vectors, fills it part by part and tunes its search parameter: memory stays
bounded by the few parts in the pipeline's queues plus the index.
Everything is written into a partial folder renamed into place at the end; an interrupted
build leaves that folder behind and the same command resumes from the last complete part.
Where the rows come from and where they are encoded is a `PartSource`: one file encoded in
this process (`semsearch.ingest.file_source`), many files (`semsearch.ingest.corpus_files`) in this process or on a Ray
cluster (`semsearch.distributed`); every source writes the same parts.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from semsearch import __version__, phases
from semsearch.ann.devices import CPU, FaissDevice, device_words, faiss_device
from semsearch.ann.factory import IndexSpec, choose_index
from semsearch.ann.tune import TUNING_K, TuningResult, log_tuned
from semsearch.ann.vector_index import VectorIndex, prepare_vectors
from semsearch.disk import check_free_space, free_bytes, is_no_space
from semsearch.errors import (
    Interrupted,
    NotWritableError,
    ResumableError,
    SemsearchError,
    as_interrupted,
)
from semsearch.ingest.build_options import (
    STORE_VECTORS,
    BuildOptions,
    EncodedRows,
    bytes_needed,
    cannot_write,
    check_build_options,
)
from semsearch.ingest.build_state import (
    STATE_FILE,
    build_state,
    kept_message,
    out_of_space,
    prepare_partial,
)
from semsearch.ingest.chunk_rows import stored_documents
from semsearch.ingest.file_source import FilePartSource, many_files_source
from semsearch.ingest.saved_slices import remove_slices
from semsearch.io.corpus import is_many_files
from semsearch.io.documents import is_document_folder
from semsearch.io.own_vectors import ColumnVectors, column_spec, with_vector_column
from semsearch.models.encoder import Encoder
from semsearch.models.model_folder import DEFAULT_MODEL, require_kind, resolve_model
from semsearch.models.prompts import query_prompt, with_prompt
from semsearch.models.query_loader import open_model_export
from semsearch.phases import phase
from semsearch.store.filling import add_parts, trained_index
from semsearch.store.folders import (
    IndexFolder,
    partial_folder,
    publish,
)
from semsearch.store.generation import now, segment_name, timed_record
from semsearch.store.held_out import draw_held_out, held_out_count, without
from semsearch.store.lexical import index_segment_texts
from semsearch.store.manifest import (
    LexicalSpec,
    Manifest,
    SegmentRecord,
    SourceSpec,
    write_manifest,
)
from semsearch.store.rescoring import tune_segment
from semsearch.store.segment import Segment, SegmentWriter, document_split, index_file_name

log = logging.getLogger(__name__)

# Failures a second run can finish from what was encoded (complete parts and the slices
# saved of the others): an interrupt (Ctrl-C, or SIGTERM as the command line raises it; a
# handler that exits) or running out of memory (retry with a smaller --batch-size). A
# `ResumableError` (a cluster job that failed after its retries) too. Any other failure
# removes the partial folder.
RESUMABLE = (KeyboardInterrupt, SystemExit, MemoryError, ResumableError)


class PartSource(Protocol):
    """Where a build's rows come from and where they are encoded into the first segment's parts.

    Every source numbers parts and ids the same way (ids are row numbers in the input), so
    the parts a source wrote can be resumed by another.
    """

    name: str  # what messages call the input

    def usable_rows(self) -> int:
        """Check the input and count the rows with a text, before anything is encoded."""

    def fingerprint(self) -> str:
        """A hash of the input's content: a resumed build needs it unchanged."""

    def encode_parts(self, encoder, writer: SegmentWriter, options: BuildOptions) -> EncodedRows:
        """Encode and write every part `writer` does not hold yet."""

    def source_spec(self, rows: EncodedRows, options: BuildOptions) -> SourceSpec:
        """What the manifest records as the first source."""

    def operation(self) -> dict:
        """What the manifest's `operation` records about how the build ran."""

    # Optional: `index_parts(spec, encoder, segment, folder, options, device) -> IndexedParts`
    # indexes the parts itself (default: `_index_here`, in this process), and
    # `reads_vector_column = True` says its encode stage takes `--vector-column`.


def build_index(
    options: BuildOptions, encoder: Encoder | None = None, source: PartSource | None = None
) -> IndexFolder:
    """Build the index `options` describe and return its folder; see the module docstring.

    `source` says where the rows come from and where they are encoded (default: the corpus
    file, folder or glob of `options`, in this process). Where its time went, phase by
    phase (`semsearch.phases`), is in the manifest's operation and, with -v, the log.
    """
    with phases.timing() as timer:
        folder = _build_index(options, encoder, source, timer)
        log.info("build %s: %s", options.index_name, timer.report().line())
    return folder


def _build_index(
    options: BuildOptions,
    encoder: Encoder | None,
    source: PartSource | None,
    timer: phases.PhaseTimer,
) -> IndexFolder:
    with phase("scan"):  # the options and the input checked, the usable rows counted
        check_build_options(options, options.index_name)
        options, source = _source(options, source)
        usable = source.usable_rows()
    if usable == 0:
        raise SemsearchError(
            f"{source.name} has no non-empty {options.text_column!r} texts: nothing to index"
        )
    # Where FAISS trains, adds and tunes, checked before the model loads. A cluster's
    # `--device` is its workers' (the driver's FAISS then takes a GPU when it has one).
    device = faiss_device(getattr(source, "driver_device", options.device))
    with phase("load model"):
        encoder = _encoder(options, source, encoder)
    # Choose the index for the rows that will be indexed, and check FAISS can make it, now:
    # not after an hour of encoding.
    spec = choose_index(
        options.index, usable, encoder.dimension, options.metric, options.memory_budget
    )
    VectorIndex.create(spec, encoder.dimension)
    partial = partial_folder(Path(options.out_dir), options.index_name)
    with phase("fingerprint"):
        source_sha256 = source.fingerprint()
    free_before = free_bytes(partial)
    needed = bytes_needed(partial, options, spec, usable, encoder.dimension)
    check_free_space(Path(options.out_dir), needed, "build")  # vectors and index, known now
    try:
        prepare_partial(partial, build_state(options, encoder, source_sha256))
    except OSError as exc:
        if is_no_space(exc):
            raise out_of_space(partial, options, free_before, needed) from exc
        raise NotWritableError(cannot_write(options.out_dir, exc.strerror or str(exc))) from exc
    try:
        manifest = _write_index(
            IndexFolder(partial), options, source, encoder, spec, usable, device
        )
        write_manifest(partial, timed_record(partial, manifest, timer))
        (partial / STATE_FILE).unlink()
        final = Path(options.out_dir) / options.index_name
        publish(partial, final, options.overwrite)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: one line says what was kept
        interrupted = as_interrupted(exc)
        kept = kept_message(partial, usable, options, source)
        raise Interrupted(f"{interrupted.stopped}: {kept}", interrupted.signal_number) from None
    except RESUMABLE as exc:
        log.warning("%s: %s", type(exc).__name__, kept_message(partial, usable, options, source))
        raise
    except BaseException as exc:
        if is_no_space(exc):  # the finished parts are kept: the same command resumes
            raise out_of_space(partial, options, free_before, needed) from exc
        shutil.rmtree(partial, ignore_errors=True)  # bad input or a bug: leave nothing half-written
        raise
    return IndexFolder(final)


def _source(options: BuildOptions, source: PartSource | None) -> tuple[BuildOptions, PartSource]:
    """The options completed (the model, the vector column) and the source of the rows."""
    if options.vector_column is not None:
        own = source is not None and not getattr(source, "reads_vector_column", False)
        options = with_vector_column(options, own)
    elif options.model is None:
        options = replace(options, model=DEFAULT_MODEL)
    if source is None and is_many_files(options.corpus) and not is_document_folder(options.corpus):
        source = many_files_source(options)
    source = source if source is not None else FilePartSource(options)
    # A chunked build reads chunk rows, each with its own id (`ingest.chunk_rows`).
    return getattr(source, "options", options), source


def _encoder(options: BuildOptions, source: PartSource, encoder: Encoder | None) -> Encoder:
    """The encoder given, or the model loaded (or the vector column's stand-in), checked
    against the vectors of `--vector-column`."""
    if encoder is None and options.vector_column is not None and options.model is None:
        encoder = ColumnVectors(column_spec(source.dimension, options.metric), options.index_name)
    elif encoder is None:
        if options.show_progress:  # seconds to minutes (torch, the weights, the CPU export)
            require_kind(resolve_model(options.model), "bi-encoder")  # its errors stay one line
            log.warning("loading model %s on %s", options.model, device_words(options.device))
        encoder = open_model_export(options)
    if encoder is None:
        from semsearch.models.bi_encoder import BiEncoder  # torch only where no export serves

        encoder = BiEncoder.load(
            options.model,
            device=options.device,
            quantization=options.quantization,
            runtime=options.runtime,
            query_prompt=options.query_prompt,
            document_prompt=options.document_prompt,
        )
    if options.vector_column is not None and encoder.dimension != source.dimension:
        raise SemsearchError(
            f"the vectors of {options.vector_column!r} are {source.dimension}-d, but model "
            f"{encoder.name!r} makes {encoder.dimension}-d ones: name the model that made them"
        )
    return encoder


def _write_index(
    folder: IndexFolder,
    options: BuildOptions,
    source: PartSource,
    encoder,
    spec: IndexSpec,
    usable: int,
    device,
) -> Manifest:
    """Encode the parts into the partial `folder`, index them: the first generation's record
    (its `build_seconds` left for the caller)."""
    split = document_split(getattr(source, "chunks", None), options.text_column)
    writer = SegmentWriter(
        folder.segment_dir(segment_name(0)), STORE_VECTORS[options.store_vectors], split
    )
    encoded = source.encode_parts(encoder, writer, options)
    remove_slices(writer.folder)  # every part is complete: no slice is needed any more
    record = SegmentRecord(
        segment_name(0), 0, writer.part_count(), "", 0, documents=split is not None
    )
    segment = Segment(writer.folder, record)
    total = sum(len(ids) for ids in segment.part_ids)
    if total != usable:
        raise SemsearchError(
            f"{source.name} changed while it was being indexed ({usable} rows with a text, "
            f"then {total}): build again once it stays the same"
        )
    chunks = getattr(source, "chunks", None)
    # The input's rows that were indexed: a chunked index's documents, each some chunks.
    documents = total if chunks is None else stored_documents(segment, chunks.document_column)
    # A source may index the parts itself (`--engine ray`: one segment per worker).
    if hasattr(source, "index_parts"):
        indexed = source.index_parts(spec, encoder, segment, folder, options, device)
    else:
        indexed = _index_here(spec, encoder, segment, folder, options, device)
    return Manifest(
        name=options.index_name,
        generation=1,
        rows=total,
        documents=documents,
        model=encoder.spec,
        index=indexed.spec,
        source=source.source_spec(encoded, options),
        segments=indexed.records,
        next_id=encoded.read,
        files=indexed.files,
        vector_dtype=STORE_VECTORS[options.store_vectors],
        operation={
            "kind": "build",
            "rows": documents,
            **({"chunks": total} if chunks is not None else {}),
            "skipped": encoded.skipped,
            "truncated": encoded.truncated,
            # None where no model encoded rows: a model named for your own vectors encodes none.
            "runtime": None if options.vector_column is not None else encoder.runtime,
            **source.operation(),
        },
        semsearch_version=__version__,
        created_at=now(),
        build_seconds=0.0,
        tuning=indexed.tuning.to_dict() if indexed.tuning else None,
        lexical=options.lexical,
        chunks=chunks,
    )


@dataclass(frozen=True)
class IndexedParts:
    """The first segment's parts indexed: the segments they became, the spec (trained file,
    tuned parameter), the tuning, and the hashes of files already hashed (None: none)."""

    spec: IndexSpec
    records: tuple[SegmentRecord, ...]
    tuning: TuningResult | None = None
    files: dict[str, dict] | None = None


def _index_here(
    spec: IndexSpec,
    encoder,
    segment: Segment,
    folder: IndexFolder,
    options: BuildOptions,
    device,
) -> IndexedParts:
    """Train, fill and tune the segment's FAISS index in this process, then its BM25 part."""
    total = segment_rows(segment)
    with phase("train"):  # a sample of the stored vectors read, the structure trained
        index, spec = trained_index(
            spec, encoder.dimension, segment.iter_parts, total, folder, 1, device
        )
    queries = None
    if index.tunable_parameter() and options.tuning_queries:
        with phase("tune"):  # the tuning queries encoded
            queries = tuning_vectors(options, encoder, spec.metric)
    record, spec, tuning = index_segment(
        index,
        spec,
        segment,
        1,
        options.lexical,
        options.text_column,
        device,
        options.target_recall,
        queries,
        options.strict,  # --strict: a missed target fails
        options.show_progress,
    )
    if tuning is not None:
        log_tuned(tuning)
    return IndexedParts(spec, (record,), tuning)


def tuning_vectors(options: BuildOptions, encoder, metric: str) -> np.ndarray | None:
    """`--tuning-queries` encoded with the query prompt and prepared; None without them."""
    if not options.tuning_queries or not options.target_recall:
        return None
    texts = with_prompt(options.tuning_queries, query_prompt(encoder))
    return prepare_vectors(encoder.encode(texts), metric)


def index_segment(
    index: VectorIndex,
    spec: IndexSpec,
    segment: Segment,
    generation: int,
    lexical: LexicalSpec | None,
    text_column: str | None,
    device: FaissDevice = CPU,
    target: float | None = None,
    queries: np.ndarray | None = None,
    strict: bool = False,
    show_progress: bool = False,
) -> tuple[SegmentRecord, IndexSpec, TuningResult | None]:
    """Fill a segment's (trained) FAISS index from its parts on `device`, tune it to `target`
    recall (on `queries`, or a sample of its rows kept out of the structure and searched
    exactly beside it: `semsearch.store.held_out`), write it, then its BM25 part if it has
    none: what build, add, reindex, compact and a Ray worker share. The segment's record,
    the spec with the tuned parameter, and the tuning."""
    rows = segment_rows(segment)
    tuning = None
    tune = bool(target and index.tunable_parameter())
    held = np.empty(0, np.int64)
    if tune and queries is None:  # tuned on rows kept out of the structure (`store.held_out`)
        held, _ = draw_held_out(segment.iter_parts, held_out_count(rows))
    segment = Segment(segment.folder, replace(segment.record, rows=rows, held_out=tuple(held)))
    with index.placed(device):
        with phase("add"):
            add_parts(index, without(segment.iter_parts, held), rows - len(held), show_progress)
        if tune and queries is None and rows < 2:
            # A sampled row is left out of its own results: nothing is left to measure.
            log.warning("1 row: nothing to tune; keeping %s", index.tunable_parameter())
        elif tune:
            with phase("tune"), phases.untimed():
                tuning = tune_segment(index, spec, segment, target, TUNING_K, queries, strict)
    if tuning is not None:
        spec = replace(spec, search_params=tuning.search_params())
    index_file = index_file_name(generation)
    with phase("write index"):
        size = index.write(segment.folder / index_file)
    record = replace(segment.record, rows=rows, index_file=index_file, index_file_bytes=size)
    if lexical is not None and record.lexical_dir is None:
        with phase("lexical"):
            lexical_dir = index_segment_texts(
                segment.folder, text_column, rows, record.parts, lexical, generation
            )
        record = replace(record, lexical_dir=lexical_dir)
    return record, spec, tuning


def segment_rows(segment: Segment) -> int:
    return sum(len(ids) for ids in segment.part_ids)
