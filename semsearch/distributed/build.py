"""`semsearch build --engine ray`: the local build's steps, with every one that grows with the
corpus on a Ray cluster.

The driver checks the files; Ray tasks scan them (the ids stay on the workers, checked for
repeats by one task), an actor pool encodes the parts (`semsearch.distributed.encode`), and
the parts are indexed as a segment per worker (`semsearch.distributed.segments`). The
driver holds counts, records and hashes, never the ids, vectors or index; the manifest is
the local build's, with a segment per worker.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import replace

import pyarrow as pa

from semsearch.ann.factory import IndexSpec
from semsearch.ann.tune import log_tuned
from semsearch.distributed.cluster import RayConnection, RayOptions, Workers, require_ray
from semsearch.distributed.encode import (
    EncoderSetup,
    actor_runtime,
    encode_held_parts,
    encode_units,
    job_errors,
)
from semsearch.distributed.segments import (
    SegmentJob,
    TuningJob,
    finish_split,
    index_segment_on_worker,
    part_ranges,
    rejoin_parts,
    split_parts,
    train_segment,
)
from semsearch.errors import ResumableError
from semsearch.ingest.build import IndexedParts, PartSource, build_index, tuning_vectors
from semsearch.ingest.build_options import BuildOptions, EncodedRows
from semsearch.ingest.corpus_files import (
    FileStream,
    ManyFilesSource,
    check_unique_ids,
    open_stream,
    scan_file,
)
from semsearch.ingest.file_parts import FileScan, part_count, plan_units
from semsearch.ingest.file_source import FilePartSource, stream_parts
from semsearch.io.corpus import check_id_column, is_many_files, open_corpus
from semsearch.io.documents import is_document_folder
from semsearch.io.filesystems import check_local_folder, location_sha256, location_text
from semsearch.io.own_vectors import (
    ColumnVectors,
    VectorColumn,
    dimension_of,
    with_vector_column,
)
from semsearch.store.folders import IndexFolder
from semsearch.store.manifest import SourceSpec
from semsearch.store.segment import Segment, SegmentWriter

log = logging.getLogger(__name__)

# A chunked build's parts sent to the actor pool at a time, per actor: the driver holds these.
PARTS_PER_JOB = 2


def build_index_on_ray(
    options: BuildOptions, ray_options: RayOptions | None = None, encoder=None
) -> IndexFolder:
    """Build the index `options` describe on a Ray cluster; the folder is the local build's.

    `options.corpus` may be one file, a folder or a glob of files of one format and columns,
    local or a URI (`s3://bucket/prefix/*.parquet`) every node can read; `options.out_dir` is
    a folder every node sees. With `options.vector_column`, one file of your own vectors.
    """
    check_local_folder(options.out_dir, "--out-dir")
    if options.vector_column is not None:
        options = with_vector_column(options)
    ray_options = ray_options or RayOptions(show_progress=options.show_progress)
    with RayConnection(ray_options, options.device) as connection:
        return build_index(options, encoder, ray_source(options, connection))


def ray_source(options: BuildOptions, connection: RayConnection) -> PartSource:
    """The files read, encoded and indexed across the cluster (`RaySource`), or, where texts
    are to be cut into chunks, cut here and encoded by the cluster (`RayChunkSource`)."""
    could_chunk = options.vector_column is None and options.text_column is not None
    if options.chunking == "off" or not could_chunk:
        return RaySource(options, connection)
    many = is_many_files(options.corpus) and not is_document_folder(options.corpus)
    streamed = RayChunkSource(options, connection, open_stream(options.corpus) if many else None)
    return streamed if streamed.chunks is not None else RaySource(options, connection)


class RayChunkSource(FilePartSource):
    """A chunked build on Ray: the driver reads the corpus and cuts its texts into chunk rows,
    part by part (as a local build does), and the actor pool encodes and writes the parts (as
    `add --engine ray` does); the parts are indexed here."""

    driver_device = "auto"  # `--device` is the workers'; FAISS here takes a GPU if it has one

    def __init__(
        self, options: BuildOptions, connection: RayConnection, corpus: FileStream | None = None
    ) -> None:
        super().__init__(options, corpus)
        self.connection = connection

    def encode_parts(self, encoder, writer: SegmentWriter, options: BuildOptions) -> EncodedRows:
        workers = self.connection.workers()
        counts = {"read": 0, "skipped": 0}
        truncated = encode_held_parts(
            stream_parts(self.corpus, writer, options, counts),
            workers,
            encoder_setup(encoder, workers, options),
            writer,
            options.text_column,
            PARTS_PER_JOB * workers.count,  # the driver holds a few parts at a time
        )
        return EncodedRows(counts["read"], counts["skipped"], truncated)


class RaySource(ManyFilesSource):
    """The files of a build, scanned, encoded and indexed on a Ray cluster (a `PartSource`).

    Ray is joined when the files are scanned, after every check that needs no cluster."""

    # `--device` is the workers'; FAISS on the driver takes its GPU when it has one.
    driver_device = "auto"
    reads_vector_column = True

    def __init__(self, options: BuildOptions, connection: RayConnection) -> None:
        super().__init__(options)
        self.connection = connection
        self.dimension: int | None = None  # of the vector column's vectors, once scanned

    def scan(self) -> list[FileScan]:
        """Each file scanned by a task; its ids stay in the object store, where one task
        checks them for repeats across files: the driver gets counts and hashes only."""
        ray = require_ray()
        self.connection.workers()
        options = self.options
        scan = ray.remote(num_cpus=1, max_retries=3, num_returns=3)(scan_apart)
        refs = [
            scan.remote(
                location_text(path),
                options.text_column,
                options.id_column,
                options.strict,
                options.vector_column,
            )
            for path in self.files
        ]
        with job_errors("reading the files", resumable=False):
            scans = ray.get([ref[0] for ref in refs])
            dimensions = {value for value in ray.get([ref[2] for ref in refs]) if value}
            if options.id_column is not None and len(scans) > 1:
                check = ray.remote(num_cpus=1, max_retries=3)(check_ids_apart)
                ray.get(check.remote(scans, options.id_column, *[ref[1] for ref in refs]))
        self.dimension = min(dimensions) if dimensions else None
        return scans

    def usable_rows(self) -> int:
        self.scans = self.scan()  # the ids were checked across files by `scan`
        return sum(scan.usable for scan in self.scans)

    def encode_parts(self, encoder, writer: SegmentWriter, options: BuildOptions) -> EncodedRows:
        rejoin_parts(writer.folder.parent.parent)  # a build stopped in its index stage
        workers = self.connection.workers()
        units = plan_units(self.scans, options.part_rows, writer.has)
        truncated, own = 0, options.vector_column
        if units:
            todo = sum(len(unit.wanted) for unit in units)
            log.info("encoding %d parts on Ray (%s)", todo, workers.describe())
            truncated = encode_units(
                units,
                workers,
                encoder_setup(encoder, workers, options),
                writer,
                options.text_column,
                options.part_rows,
                options.strict,
                VectorColumn(own, self.dimension, options.metric) if own else None,
            )
            if truncated:
                log.warning(
                    "%d texts were longer than the model's max_length and were cut", truncated
                )
        expected = part_count(self.scans, options.part_rows)
        if writer.part_count() != expected:
            raise ResumableError(
                f"the Ray job wrote {writer.part_count()} of {expected} "
                + ("part" if expected == 1 else "parts"),
                "run the same command again to encode the rest",
            )
        return self.encoded_rows(truncated)

    def index_parts(
        self,
        spec: IndexSpec,
        encoder,
        segment: Segment,
        folder: IndexFolder,
        options: BuildOptions,
        device,
    ) -> IndexedParts:
        """Train on a worker, then index one segment per worker (`semsearch.distributed.segments`)."""
        ray = require_ray()
        workers = self.connection.workers()
        threads = workers.threads if not workers.num_gpus else 1
        task = {
            "num_cpus": workers.num_cpus if not workers.num_gpus else 1.0,
            "max_retries": 3,
            "scheduling_strategy": "SPREAD",
        }
        parts, rows = segment.record.parts, sum(len(ids) for ids in segment.part_ids)
        train = ray.remote(train_segment).options(**task)
        with job_errors("training the index", resumable=True):
            spec = ray.get(
                train.remote(
                    str(folder.path), segment.name, parts, rows, spec, encoder.dimension, threads
                )
            )
        ranges = part_ranges(parts, workers.count)
        names = split_parts(folder.path, ranges)
        tuning = _tuning_job(spec, encoder, options)
        index = ray.remote(index_segment_on_worker).options(**task)
        refs = [
            index.remote(
                SegmentJob(
                    str(folder.path),
                    name,
                    high - low,
                    spec,
                    encoder.dimension,
                    options.text_column,
                    options.lexical,
                    threads,
                    documents=segment.record.documents,
                ),
                tuning if number == 0 else None,
            )
            for number, (name, (low, high)) in enumerate(zip(names, ranges))
        ]
        with job_errors("indexing the segments", resumable=True):
            indexed = ray.get(refs)
        finish_split(folder.path)
        result = indexed[0].tuning
        if result is not None:
            log_tuned(result)
        files = {name: entry for done in indexed for name, entry in done.files.items()}
        log.info("indexed %d rows as %d segments on Ray", rows, len(indexed))
        return IndexedParts(
            spec if result is None else replace(spec, search_params=result.search_params()),
            tuple(done.record for done in indexed),
            result,
            files,
        )

    def source_spec(self, rows: EncodedRows, options: BuildOptions) -> SourceSpec:
        return replace(super().source_spec(rows, options), vector_column=options.vector_column)

    def operation(self) -> dict:
        workers = self.connection.workers()
        return {
            **super().operation(),
            "engine": "ray",
            "workers": workers.count,
            "worker_device": workers.device,
            "worker_threads": workers.threads,
        }


def _tuning_job(spec: IndexSpec, encoder, options: BuildOptions) -> TuningJob | None:
    """What the first segment's worker tunes to, with `--tuning-queries` encoded here."""
    if not options.target_recall:
        return None
    queries = tuning_vectors(options, encoder, spec.metric)
    return TuningJob(options.target_recall, queries, options.strict)


def encoder_setup(encoder, workers: Workers, options: BuildOptions) -> EncoderSetup:
    """How each actor gets its encoder: the model, or for your own vectors none at all."""
    if options.vector_column is not None:
        load = functools.partial(ColumnVectors, encoder.spec)
        return EncoderSetup(load, "", "none", options.batch_size, workers.threads)
    from semsearch.models.bi_encoder import BiEncoder

    load = functools.partial(
        BiEncoder.load,
        options.model,
        device=workers.device,
        quantization=options.quantization,
        runtime=actor_runtime(options.runtime, workers.device),
        query_prompt=encoder.spec.query_prompt,  # the driver's, overrides included
        document_prompt=encoder.spec.document_prompt,
    )
    return EncoderSetup(
        load, encoder.spec.fingerprint, workers.device, options.batch_size, workers.threads
    )


def scan_apart(
    path: str,
    text_column: str | None,
    id_column: str | None,
    strict: bool,
    vector_column: str | None = None,
) -> tuple[FileScan, pa.Array | None, int | None]:
    """On a worker: `scan_file` (and, with `vector_column`, every vector checked), returned as
    the scan without its ids, the ids, and the vectors' dimension (None: no vector column)."""
    if vector_column is None:
        scan = scan_file(path, text_column, id_column, strict)
        return replace(scan, ids=None), scan.ids, None
    corpus = open_corpus(path)
    dimension, rows = dimension_of(
        corpus.batches(columns=[vector_column]), vector_column, corpus.path.name
    )
    if text_column is not None:
        return (*scan_apart(path, text_column, id_column, strict)[:2], dimension)
    if id_column is not None:
        check_id_column(corpus, id_column)
    return (
        FileScan(location_text(path), rows, rows, location_sha256(corpus.path), None),
        None,
        dimension,
    )


def check_ids_apart(scans: list[FileScan], id_column: str, *ids: pa.Array | None) -> None:
    """On a worker: `check_unique_ids` over the files' ids, which never reach the driver."""
    check_unique_ids([replace(scan, ids=values) for scan, values in zip(scans, ids)], id_column)
