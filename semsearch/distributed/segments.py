"""The index stage of `build --engine ray`: one segment per worker, nothing gathered on the driver.

A Ray task trains the structure once on the local build's sample, into `trained/`; the
driver renames each worker's contiguous range of parts into a segment of its own
(`SPLIT_FILE` records it, so a stopped build puts them back and resumes); a task per segment
then fills a copy of the trained structure, writes it and its BM25 part and hashes its
files (the first also tunes). Why segments: they share the trained centroids, so their
merged results are one index's; the searcher already merges segments, and no process ever
holds the whole index.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from semsearch.ann.devices import CPU
from semsearch.ann.factory import IndexSpec
from semsearch.ann.tune import TuningResult
from semsearch.ann.vector_index import VectorIndex
from semsearch.checksums import describe_files
from semsearch.disk import temporary_for
from semsearch.ingest.build import index_segment
from semsearch.store.file_names import (
    part_arrow_name,
    part_documents_names,
    part_file_names,
    segment_file_names,
)
from semsearch.store.filling import trained_index
from semsearch.store.folders import IndexFolder
from semsearch.store.generation import segment_name
from semsearch.store.manifest import LexicalSpec, SegmentRecord
from semsearch.store.segment import Segment

log = logging.getLogger(__name__)

SPLIT_FILE = "ray_split.json"  # in the partial folder while parts sit in their workers' segments


@dataclass(frozen=True)
class SegmentJob:
    """What one worker indexes: segment `name` of the index in `folder`, holding `parts` parts."""

    folder: str
    name: str
    parts: int
    spec: IndexSpec
    dimension: int
    text_column: str | None
    lexical: LexicalSpec | None
    threads: int = 1
    documents: bool = False  # the parts keep their documents apart (`store.documents`)


@dataclass(frozen=True)
class TuningJob:
    """Tune on the segment's rows to `target` recall@10: with `queries` (prepared vectors of
    `--tuning-queries`), or else a sample of the segment's own rows, each left out of its
    own results; `strict` refuses a missed target."""

    target: float
    queries: np.ndarray | None = None
    strict: bool = False


@dataclass(frozen=True)
class IndexedSegment:
    """What a worker reports: the segment's record, its files' sizes and hashes, its tuning."""

    record: SegmentRecord
    files: dict[str, dict]
    tuning: TuningResult | None = None


def train_segment(
    folder: str, name: str, parts: int, rows: int, spec: IndexSpec, dimension: int, threads: int = 1
) -> IndexSpec:
    """On a worker: the local build's training (`trained_index`) over segment `name`'s parts;
    the spec naming the trained file it wrote (unchanged for an untrained structure)."""
    faiss.omp_set_num_threads(threads)
    index_folder = IndexFolder(Path(folder))
    segment = Segment(index_folder.segment_dir(name), SegmentRecord(name, rows, parts, "", 0))
    return trained_index(spec, dimension, segment.iter_parts, rows, index_folder, 1, CPU)[1]


def index_segment_on_worker(job: SegmentJob, tuning: TuningJob | None = None) -> IndexedSegment:
    """On a worker: fill, write and (with `tuning`) tune segment `job.name`'s FAISS index from
    its parts, then its BM25 part; nothing but the record, hashes and tuning goes back."""
    faiss.omp_set_num_threads(job.threads)
    index_folder = IndexFolder(Path(job.folder))
    record = SegmentRecord(job.name, 0, job.parts, "", 0, documents=job.documents)
    segment = Segment(index_folder.segment_dir(job.name), record)
    if job.spec.trained_file is not None:
        index = VectorIndex.read(index_folder.trained_path(job.spec.trained_file), job.spec.metric)
    else:
        index = VectorIndex.create(job.spec, job.dimension)
    # `build`'s tuning on one segment: the centroids are shared, so a list holds the same
    # share of each segment's rows and the nprobe that reaches the target on one reaches
    # it on all.
    tuned = (tuning.target, tuning.queries, tuning.strict) if tuning else ()
    record, _, result = index_segment(
        index, job.spec, segment, 1, job.lexical, job.text_column, CPU, *tuned
    )
    return IndexedSegment(
        record, describe_files(Path(job.folder), segment_file_names(record), {}), result
    )


def part_ranges(parts: int, workers: int) -> list[tuple[int, int]]:
    """`parts` cut into at most `workers` contiguous ranges of near-equal size."""
    bounds = np.linspace(0, parts, min(workers, parts) + 1).round().astype(int)
    return [(int(low), int(high)) for low, high in zip(bounds[:-1], bounds[1:]) if high > low]


def split_parts(folder: Path, ranges: list[tuple[int, int]]) -> list[str]:
    """Move the parts of each range after the first into a segment of its own (renumbered
    from 0; the first range stays in the first segment); the segments' names, in order."""
    names = [segment_name(number) for number in range(len(ranges))]
    plan = [{"name": name, "low": low, "high": high} for name, (low, high) in zip(names, ranges)]
    _write_json(folder / SPLIT_FILE, plan)
    segments = folder / "segments"
    for entry in plan[1:]:
        target = segments / entry["name"]
        target.mkdir(parents=True, exist_ok=True)
        for part in range(entry["low"], entry["high"]):
            _move_part(segments / names[0], part, target, part - entry["low"])
    return names


def rejoin_parts(folder: Path) -> None:
    """Undo an interrupted `split_parts`: every part back in the first segment, under its own
    number, and what the index stage wrote removed, so the build resumes as if never split."""
    split = folder / SPLIT_FILE
    if not split.is_file():
        return
    plan = json.loads(split.read_text(encoding="utf-8"))
    segments = folder / "segments"
    first = segments / plan[0]["name"]
    for entry in plan[1:]:
        source = segments / entry["name"]
        for part in range(entry["low"], entry["high"]):
            _move_part(source, part - entry["low"], first, part)
        shutil.rmtree(source, ignore_errors=True)
    for path in first.iterdir():  # index files and BM25 parts of the interrupted stage
        if not path.name.startswith("part-"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    split.unlink()
    log.info("put back the parts of an interrupted index stage in %s", first)


def finish_split(folder: Path) -> None:
    """The segments are indexed and recorded: the split is final."""
    (folder / SPLIT_FILE).unlink(missing_ok=True)


def _move_part(source: Path, number: int, target: Path, new_number: int) -> None:
    """Rename a part's files, the vectors file (which marks a part complete) last; a file
    already moved is skipped, so moving again after a stop finishes the move."""
    vectors, ids, metadata = part_file_names(number)
    new_vectors, new_ids, new_metadata = part_file_names(new_number)
    arrow, new_arrow = part_arrow_name(number), part_arrow_name(new_number)
    documents, new_documents = part_documents_names(number), part_documents_names(new_number)
    for old, new in [
        (ids, new_ids),
        (metadata, new_metadata),
        (arrow, new_arrow),
        *zip(documents, new_documents),
        (vectors, new_vectors),
    ]:
        if (source / old).exists():
            os.replace(source / old, target / new)


def _write_json(path: Path, data: object) -> None:
    with temporary_for(path) as temporary:
        temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
