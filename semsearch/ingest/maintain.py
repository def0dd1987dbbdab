"""`reindex`, `compact`, `rollback` and `tune`: new generations made from the stored vectors.

None of them loads the model (except `tune` with text queries): the vectors on disk are
enough to rebuild any FAISS structure, merge segments, or measure recall, and the stored
texts to build the lexical (BM25) parts (`set_lexical`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace

import numpy as np

from semsearch.ann.devices import FaissDevice, faiss_device
from semsearch.ann.factory import choose_index, estimate_bytes
from semsearch.ann.tune import TUNING_K, TuningResult, log_tuned
from semsearch.ann.vector_index import prepare_vectors
from semsearch.disk import check_free_space, commit
from semsearch.errors import SemsearchError
from semsearch.ingest.build import index_segment
from semsearch.ingest.build_options import DEFAULT_PART_ROWS, check_target
from semsearch.ingest.chunk_rows import stored_documents
from semsearch.ingest.merge import write_merged
from semsearch.ingest.update import new_segment, written_segment
from semsearch.options import DEFAULT_TUNING_QUERIES
from semsearch.store.file_checks import check_opened_files
from semsearch.store.filling import trained_index
from semsearch.store.folders import IndexFolder, remove_leftovers
from semsearch.store.generation import next_generation, now
from semsearch.store.lexical import index_segment_texts
from semsearch.store.manifest import (
    LexicalSpec,
    Manifest,
    generation_file,
    write_manifest,
)
from semsearch.store.rescoring import tune_segment
from semsearch.store.segment import Segment, segment_bytes
from semsearch.store.verify import check_restorable

log = logging.getLogger(__name__)


def reindex(
    folder: IndexFolder,
    requested: str,
    target_recall: float | None = 0.95,
    memory_budget: int | None = None,
    show_progress: bool = False,
    device: str = "auto",
    strict: bool = False,
) -> Manifest:
    """Rebuild the FAISS structure as `requested` (flat, ivf, hnsw, ivfpq, a factory string)
    over every live row, tuned to `target_recall`; the new generation's manifest. FAISS
    trains, adds and tunes on `device` (`auto`: a GPU when FAISS can use one). A missed
    target is a warning, or with `strict` an error that writes nothing."""
    check_target(target_recall)
    placement = faiss_device(device)
    started = time.perf_counter()
    with folder.writer_lock("reindex"):
        manifest = folder.manifest()
        check_opened_files(folder, manifest, vectors=True)  # never build on changed files
        spec = choose_index(
            requested,
            max(manifest.rows, 1),
            manifest.model.dimension,
            manifest.index.metric,
            memory_budget,
        )
        # A failure removes what it wrote (a merged segment): `IndexFolder.writer_lock`.
        new = _rebuild(
            folder,
            manifest,
            spec,
            target_recall,
            show_progress,
            "reindex",
            started,
            placement,
            strict,
        )
        write_manifest(folder.path, new)
        return new


def compact(
    folder: IndexFolder, keep: int = 1, show_progress: bool = False, device: str = "auto"
) -> Manifest:
    """Merge the segments into one without deleted rows (when there is more than one, or any
    deleted row) and forget generations older than the newest `keep`; FAISS works on
    `device` as in `reindex`."""
    if keep < 1:
        raise SemsearchError(f"--keep must be at least 1 (the current generation), not {keep}")
    placement = faiss_device(device)
    started = time.perf_counter()
    with folder.writer_lock("compact"):
        manifest = folder.manifest()
        check_opened_files(folder, manifest, vectors=True)  # never build on changed files
        needs_merge = len(manifest.segments) > 1 or any(s.deleted for s in manifest.segments)
        if needs_merge:
            spec = choose_index(
                manifest.index.requested,
                max(manifest.rows, 1),
                manifest.model.dimension,
                manifest.index.metric,
            )
            target = (manifest.tuning or {}).get("target")
            manifest = _rebuild(
                folder, manifest, spec, target, show_progress, "compact", started, placement
            )
            write_manifest(folder.path, manifest)
        for number in folder.generations()[:-keep]:
            generation_file(folder.path, number).unlink(missing_ok=True)
        remove_leftovers(folder)
        return manifest


def set_lexical(folder: IndexFolder, spec: LexicalSpec | None) -> Manifest:
    """Give every segment a lexical (BM25) part made with `spec` from its stored texts, or
    with None drop the lexical part; the new generation's manifest (the current one when
    the index already is that way)."""
    started = time.perf_counter()
    with folder.writer_lock("reindex --lexical"):
        manifest = folder.manifest()
        check_opened_files(folder, manifest)  # never build a generation on changed files
        if spec is not None and manifest.text_column is None:
            raise SemsearchError(
                f"index {manifest.name!r} holds your own vectors without texts: a BM25 part "
                "needs a text column (rebuild with --text-column)"
            )
        if spec == manifest.lexical:
            log.warning(
                "index %r already %s",
                manifest.name,
                "has no lexical part" if spec is None else "has this lexical part",
            )
            return manifest
        generation = manifest.generation + 1
        records = []
        for record in manifest.segments:
            lexical_dir = None
            if spec is not None:
                lexical_dir = index_segment_texts(
                    folder.segment_dir(record.name),
                    manifest.text_column,
                    record.rows,
                    record.parts,
                    spec,
                    generation,
                )
            records.append(replace(record, lexical_dir=lexical_dir))
        operation = {"kind": "lexical", "lexical": None if spec is None else asdict(spec)}
        new = next_generation(
            manifest, records, operation, time.perf_counter() - started, lexical=spec
        )
        write_manifest(folder.path, new)
        return new


def rollback(folder: IndexFolder, generation: int) -> Manifest:
    """Make generation `generation` current again, as a new generation (history stays linear)."""
    with folder.writer_lock("rollback"):
        target = folder.manifest(generation)
        _check_files(folder, target)
        check_restorable(folder, target.generation)  # its files, hashed in full
        # manifest.json may be the damaged file a rollback repairs: number from the records.
        newest = max([target.generation, *folder.generations()])
        next_id = max([target.next_id, *(_readable_next_ids(folder))])  # ids are never reused
        new = replace(
            target,
            generation=newest + 1,
            next_id=next_id,
            operation={"kind": "rollback", "to": generation},
            created_at=now(),
            build_seconds=0.0,
        )
        write_manifest(folder.path, new)
        return new


def retune(
    folder: IndexFolder,
    target: float,
    queries: np.ndarray | None = None,
    k: int = TUNING_K,
    sample: int = DEFAULT_TUNING_QUERIES,
    device: str = "auto",
    strict: bool = False,
) -> TuningResult:
    """Tune the search parameter on the largest segment's stored vectors (or on `queries`,
    already encoded) and record it in a new generation; the searches run on `device`."""
    check_target(target)
    placement = faiss_device(device)
    started = time.perf_counter()
    with folder.writer_lock("tune"):
        manifest = folder.manifest()
        check_opened_files(folder, manifest)  # never build a generation on changed files
        record = max(manifest.segments, key=lambda s: s.rows)
        segment = Segment(folder.segment_dir(record.name), record)
        index = segment.read_index(manifest.index.metric)
        if index.tunable_parameter() is None:
            raise SemsearchError(
                f"index {manifest.name!r} ({manifest.index.factory}) searches exactly "
                "(recall 1.0): there is nothing to tune"
            )
        if queries is not None:
            queries = prepare_vectors(queries, manifest.index.metric)
        with index.placed(placement):
            result = tune_segment(
                index, manifest.index, segment, target, k, queries, strict, sample
            )
        params = {**manifest.index.search_params, **result.search_params()}
        new = next_generation(
            manifest,
            list(manifest.segments),
            {"kind": "tune", **result.to_dict()},
            time.perf_counter() - started,
            index=replace(manifest.index, search_params=params),
            tuning=result.to_dict(),
        )
        write_manifest(folder.path, new)
        return result


def _rebuild(
    folder: IndexFolder,
    manifest: Manifest,
    spec,
    target_recall: float | None,
    show_progress: bool,
    kind: str,
    started: float,
    device: FaissDevice,
    strict: bool = False,
) -> Manifest:
    """One segment over every live row with a new `spec` index: the next generation."""
    generation = manifest.generation + 1
    check_free_space(folder.path, _rebuild_bytes(manifest, spec), kind)  # before any writing
    segment = _live_segment(folder, manifest)
    total = segment.record.rows
    if total == 0:
        raise SemsearchError(f"index {manifest.name!r} has no live rows to {kind}")
    index, spec = trained_index(
        spec, manifest.model.dimension, segment.iter_parts, total, folder, generation, device
    )
    # A merged segment gets its BM25 part here; a kept one keeps its own.
    record, spec, tuning = index_segment(
        index,
        spec,
        segment,
        generation,
        manifest.lexical,
        manifest.text_column,
        device,
        target_recall,
        strict=strict,
        show_progress=show_progress,
    )
    if tuning is not None:
        log_tuned(tuning)
    documents = manifest.live_documents
    if documents is None:  # a chunked index written before its documents were recorded
        documents = stored_documents(segment, manifest.chunks.document_column)
    counted = {"rows": documents, **({"chunks": total} if manifest.chunks else {})}
    return next_generation(
        manifest,
        [record],
        {"kind": kind, "factory": spec.factory, **counted},
        time.perf_counter() - started,
        index=spec,
        tuning=tuning.to_dict() if tuning else None,
        documents=documents,
    )


def _rebuild_bytes(manifest: Manifest, spec) -> int:
    """About what `_rebuild` writes: the new FAISS index, and the live rows' vectors where
    they are merged into a new segment."""
    rows, dimension = manifest.rows, manifest.model.dimension
    if _merges(manifest):
        return segment_bytes(rows, dimension, manifest.vector_dtype, spec.factory)
    return estimate_bytes(spec.factory, rows, dimension) or 0


def _merges(manifest: Manifest) -> bool:
    return len(manifest.segments) != 1 or manifest.segments[0].deleted > 0


def _live_segment(folder: IndexFolder, manifest: Manifest) -> Segment:
    """The one segment holding every live row: the existing one when there is a single segment
    without deletions, else a new segment copied from the live rows (vectors never re-encoded)."""
    if not _merges(manifest):
        record = manifest.segments[0]
        return Segment(folder.segment_dir(record.name), record)
    writer = new_segment(folder, manifest)
    segments = [Segment(folder.segment_dir(record.name), record) for record in manifest.segments]
    # Part by part in id order (a merged segment keeps ids ascending): `semsearch.ingest.merge`.
    write_merged(segments, writer, manifest.model.dimension, DEFAULT_PART_ROWS)
    segment = written_segment(writer)
    commit(writer.folder, folder.segment_dir(segment.name))
    return Segment(folder.segment_dir(segment.name), segment.record)


def _readable_next_ids(folder: IndexFolder) -> list[int]:
    """The next_id of every generation record that reads, and of manifest.json if it does."""
    values = []
    for number in [None, *folder.generations()]:
        try:
            values.append(folder.manifest(number).next_id)
        except SemsearchError:
            continue
    return values


def _check_files(folder: IndexFolder, manifest: Manifest) -> None:
    missing = [
        record.name
        for record in manifest.segments
        if not (folder.segment_dir(record.name) / record.index_file).is_file()
        or (
            record.lexical_dir
            and not (folder.segment_dir(record.name) / record.lexical_dir).is_dir()
        )
    ]
    if missing:
        raise SemsearchError(
            f"generation {manifest.generation} of index {manifest.name!r} lost its files to a "
            f"compaction (segment {missing[0]}): it cannot be restored"
        )
