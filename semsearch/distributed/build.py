"""`semsearch build --engine ray`: the local build's steps, with the heavy ones on a Ray cluster.

The driver checks the files, then Ray runs what grows with the corpus: scanning the files
(one task each), encoding the parts (`semsearch.distributed.encode`), and, for IVF, filling
the index: the parts are split into one contiguous range per worker, each worker fills an
empty copy of the trained index with its range and writes it to the shared folder, and the
driver moves their inverted lists into one index (`faiss.merge_into`, as FAISS'
`contrib.ondisk.merge_ondisk` does), in part order, so the result is the index a local build
fills. Flat and HNSW indexes are filled from the parts on the driver. Training, tuning, the
lexical part and the manifest are the local build's own (`semsearch.index.build`).
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
from pathlib import Path

import faiss
import numpy as np

from semsearch.distributed.cluster import RayConnection, RayOptions, require_ray
from semsearch.distributed.encode import EncoderSetup, encode_units, job_errors
from semsearch.errors import ResumableError
from semsearch.filesystems import check_local_folder, location_text
from semsearch.index.build import BuildOptions, EncodedRows, build_index
from semsearch.index.corpus_files import (
    FileScan,
    ManyFilesSource,
    part_count,
    plan_units,
    scan_file,
)
from semsearch.index.filling import add_parts
from semsearch.index.manifest import SegmentRecord
from semsearch.index.segment import Segment, SegmentWriter
from semsearch.index.store import IndexFolder
from semsearch.index.vector_index import VectorIndex

log = logging.getLogger(__name__)

FILL_FOLDER = ".fill"  # inside the partial folder, removed once merged


def build_index_on_ray(options: BuildOptions, ray_options: RayOptions | None = None,
                       encoder=None) -> IndexFolder:  # fmt: skip
    """Build the index `options` describe on a Ray cluster; the folder is the local build's.

    `options.corpus` may be one file, a folder or a glob of files of one format and columns,
    local or a URI (`s3://bucket/prefix/*.parquet`) every node can read; `options.out_dir` is
    a folder every node sees.
    """
    check_local_folder(options.out_dir, "--out-dir")
    ray_options = ray_options or RayOptions(show_progress=options.show_progress)
    with RayConnection(ray_options, options.device) as connection:
        return build_index(options, encoder, RaySource(options, connection))


class RaySource(ManyFilesSource):
    """The files of a build, scanned, encoded and (IVF) indexed on a Ray cluster (a `PartSource`).

    Ray is joined when the files are scanned, after every check that needs no cluster."""

    # `--device` is the workers'; FAISS on the driver takes its GPU when it has one.
    driver_device = "auto"

    def __init__(self, options: BuildOptions, connection: RayConnection) -> None:
        super().__init__(options)
        self.connection = connection

    def scan(self) -> list[FileScan]:
        ray = require_ray()
        self.connection.workers()
        scan = ray.remote(num_cpus=1, max_retries=3)(scan_file)
        options = self.options
        refs = [scan.remote(location_text(path), options.text_column, options.id_column, options.strict)
                for path in self.files]  # fmt: skip
        with job_errors("reading the files", resumable=False):
            return ray.get(refs)

    def encode_parts(self, encoder, writer: SegmentWriter, options: BuildOptions) -> EncodedRows:
        workers = self.connection.workers()
        units = plan_units(self.scans, options.part_rows, writer.has)
        truncated = 0
        if units:
            todo = sum(len(unit.wanted) for unit in units)
            log.info("encoding %d parts on Ray (%s)", todo, workers.describe())
            from semsearch.models.bi_encoder import BiEncoder

            load = functools.partial(BiEncoder.load, options.model, device=workers.device,
                                     quantization=options.quantization,
                                     runtime=options.runtime)  # fmt: skip
            setup = EncoderSetup(load, encoder.spec.fingerprint, workers.device, options.batch_size,
                                 workers.threads)  # fmt: skip
            done = encode_units(units, workers, setup, writer.folder, writer.vector_dtype,
                                options.text_column, options.part_rows, options.strict)  # fmt: skip
            truncated = done.truncated
            if truncated:
                log.warning(
                    "%d texts were longer than the model's max_length and were cut", truncated
                )
        expected = part_count(self.scans, options.part_rows)
        if writer.part_count() != expected:
            raise ResumableError(
                f"the Ray job wrote {writer.part_count()} of {expected} parts: run the same "
                "command again to encode the rest"
            )
        return self.encoded_rows(truncated)

    def fill(self, index: VectorIndex, segment: Segment, options: BuildOptions) -> None:
        workers = self.connection.workers()
        ranges = part_ranges(segment.record.parts, workers.count)
        if not index.is_ivf() or index.device.is_gpu or len(ranges) < 2:
            add_parts(index, segment.iter_parts, sum(len(ids) for ids in segment.part_ids),
                      options.show_progress)  # fmt: skip
            return
        fill_in_parallel(index, segment, ranges)

    def operation(self) -> dict:
        workers = self.connection.workers()
        return {**super().operation(), "engine": "ray", "workers": workers.count,
                "worker_device": workers.device, "worker_threads": workers.threads}  # fmt: skip


def fill_in_parallel(
    index: VectorIndex, segment: Segment, ranges: list[tuple[int, int]]
) -> tuple[float, float]:
    """Fill `index` (trained, empty IVF) with the segment's parts: a copy per range on the
    workers, merged here in range order. Seconds spent filling and merging."""
    ray = require_ray()
    started = time.perf_counter()
    scratch = segment.folder.parent.parent / FILL_FOLDER
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    trained = ray.put(faiss.serialize_index(index.faiss))
    task = ray.remote(num_cpus=1, max_retries=3)(fill_range)
    refs = [task.remote(trained, str(segment.folder), segment.record.parts, low, high,
                        str(scratch / f"fill-{number:05d}.faiss"), index.metric)
            for number, (low, high) in enumerate(ranges)]  # fmt: skip
    with job_errors("filling the index", resumable=True):
        paths = ray.get(refs)
    filled = time.perf_counter()
    for path in paths:
        faiss.merge_into(index.faiss, faiss.read_index(path), False)
        Path(path).unlink()
    shutil.rmtree(scratch, ignore_errors=True)
    seconds = (filled - started, time.perf_counter() - filled)
    log.info(
        "filled %d copies of the index in %.1f s, merged them in %.1f s", len(ranges), *seconds
    )
    return seconds


def fill_range(trained: np.ndarray, folder: str, parts: int, low: int, high: int, out: str,
               metric: str) -> str:  # fmt: skip
    """On a worker: an empty copy of the trained index filled with parts [low, high), written to `out`."""
    faiss.omp_set_num_threads(1)
    index = VectorIndex(faiss.deserialize_index(trained), metric)
    segment = Segment(Path(folder), SegmentRecord("", 0, parts, "", 0))
    for part in range(low, high):
        index.add(np.asarray(segment.part_vectors(part), dtype=np.float32), segment.part_ids[part])
    index.write(Path(out))
    return out


def part_ranges(parts: int, workers: int) -> list[tuple[int, int]]:
    """`parts` cut into at most `workers` contiguous ranges of near-equal size."""
    bounds = np.linspace(0, parts, min(workers, parts) + 1).round().astype(int)
    return [(int(low), int(high)) for low, high in zip(bounds[:-1], bounds[1:]) if high > low]
