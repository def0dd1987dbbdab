"""Checking an index's files against the sizes and hashes its manifest records.

Two depths:

- On open (`check_opened_files`, run by every search snapshot): the size of every file of
  the generation, and the hash of the files an open reads whole anyway (ids, metadata,
  FAISS files, deletions). Hashing those costs little next to reading them (XXH3 runs at
  about 14 GB/s from the page cache), needs no state on disk, and catches a same-size
  edit of exactly the files whose content decides the answers. A "verified" stamp keyed
  by (size, mtime_ns) was rejected: a reader would have to write into the index folder,
  and an edit within one tick of the coarse file clock keeps the stamp valid. Vectors are
  memory-mapped and read piecemeal, so an open checks only their size; whatever reads them
  as vectors (a filtered exact search, an exact stand-in) hashes them first, once per
  reader (`check_vector_files`); `verify` hashes them all.
- In full (`verify_index`, `semsearch verify`): every file's size and hash, the FAISS
  files' metric and row counts, the manifest against its generation's record; a damaged
  index is told which earlier generation verifies, to roll back to.

Indexes written before checksums were recorded are checked by size where the manifest
records one (FAISS files) and by row counts; `record_checksums` (`semsearch verify NAME
--record`) hashes their files as they are now and records the result in a new generation.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from semsearch.checksums import HASH_NAME, file_digest
from semsearch.errors import DamagedIndexError, SemsearchError
from semsearch.store.file_names import SEGMENTS_DIR, part_arrow_name, part_file_names
from semsearch.store.folders import IndexFolder
from semsearch.store.generation import next_generation
from semsearch.store.manifest import (
    Manifest,
    SegmentRecord,
    generation_file,
    load_record,
    write_manifest,
)

log = logging.getLogger(__name__)


@dataclass
class VerifyReport:
    """What `verify_index` found: `status` is ok, damaged or unchecked (no checksums recorded)."""

    name: str
    generation: int | None
    status: str
    files: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)
    rollback_to: int | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line: the verdict, or the first problem and what to do about it."""
        where = f"index {self.name!r} generation {self.generation}"
        if self.status == "ok":
            return (
                f"{where}: {self.files} files, {self.bytes} bytes verified in {self.seconds:.2f} s"
            )
        if self.status == "unchecked":
            return (
                f"{where} records no checksums (written before they were): sizes and row counts "
                f"are fine; record them with 'semsearch verify {self.name} --record'"
            )
        if self.generation is None:  # the record itself: its message says what to do
            return self.problems[0]
        more = f" (and {len(self.problems) - 1} more problems)" if len(self.problems) > 1 else ""
        if self.rollback_to is not None:
            advice = (
                f"roll back with 'semsearch rollback {self.name} {self.rollback_to}' "
                f"(generation {self.rollback_to} verifies) or rebuild the index with --overwrite"
            )
        else:
            advice = f"rebuild it with 'semsearch build CORPUS --name {self.name} --overwrite'"
        return f"{where}: {self.problems[0]}{more}: {advice}"


def check_opened_files(
    folder: IndexFolder,
    manifest: Manifest,
    checked: set[tuple] | None = None,
    vectors: bool = False,
) -> None:
    """Refuse a generation whose files differ from its record in size, or (for the files an
    open reads whole) in content; see the module docstring. `checked` remembers the files
    already hashed by this reader (by name and stat), so reopening a generation is cheap.
    `vectors`: hash the stored vectors too, for a writer that reads them all (reindex,
    compact): it would otherwise copy a changed file into a new generation that records it
    as good."""
    if manifest.files is None:
        log.warning(
            "index %r records no checksums: its files are checked by size only; "
            "'semsearch verify %s --record' records them",
            folder.name,
            folder.name,
        )
        return
    hashed = set(manifest.file_names(opened_only=True))
    if vectors:
        hashed |= {name for record in manifest.segments for name in _vector_files(record)}
    _check_names(folder, manifest, manifest.file_names(), hashed, checked)
    _check_segment_columns(folder, manifest, checked)


def check_vector_files(
    folder: IndexFolder,
    manifest: Manifest,
    record: SegmentRecord,
    checked: set[tuple] | None = None,
    parts: list[int] | None = None,
) -> None:
    """Refuse a segment whose stored vector files (or those of `parts`) differ from the
    record in size or hash.

    Why: an open checks vectors by size only (they are memory-mapped and read piecemeal), so
    whatever reads them as vectors (an exact search over a filter's rows, an exact stand-in
    for a small IVF segment) calls this first; a same-size edit would otherwise be served.
    `checked` as in `check_opened_files`: each file is hashed once per reader and stat.
    """
    if manifest.files is None:
        return
    names = _vector_files(record)
    names = names if parts is None else [names[part] for part in parts]
    _check_names(folder, manifest, names, set(names), checked)


def _vector_files(record: SegmentRecord) -> list[str]:
    base = f"{SEGMENTS_DIR}/{record.name}"
    return [f"{base}/{part_file_names(part)[0]}" for part in range(record.parts)]


def _check_names(
    folder: IndexFolder,
    manifest: Manifest,
    names: list[str],
    hashed: set[str],
    checked: set[tuple] | None,
) -> None:
    """Sizes of `names`, and hashes of those in `hashed` not yet in `checked`."""
    checked = set() if checked is None else checked
    for name in names:
        status = _stat(folder.path / name)
        problem = _size_problem(name, status, manifest.files.get(name))
        key = (name, status.st_size, status.st_mtime_ns, status.st_ino) if status else None
        if problem is None and name in hashed and key not in checked:
            problem = _content_problem(folder.path / name, name, manifest.files[name])
            if problem is None:
                checked.add(key)
        if problem:
            raise _changed(folder, problem)


def check_file(folder: IndexFolder, manifest: Manifest, name: str) -> None:
    """Refuse one file of the generation (a trained structure a writer starts from) whose size
    or hash is not the recorded one."""
    if manifest.files is None:
        return
    problem = _size_problem(name, _stat(folder.path / name), manifest.files.get(name))
    problem = problem or _content_problem(folder.path / name, name, manifest.files[name])
    if problem:
        raise _changed(folder, problem)


def _check_segment_columns(
    folder: IndexFolder, manifest: Manifest, checked: set[tuple] | None
) -> None:
    """Refuse a generation whose manifest names a text or id column that a segment's stored
    metadata lacks: a hand-edited manifest with a recomputed checksum passes every other
    check, and would end each search in a KeyError, or let `add` write segments whose
    column differs from the older ones'. Reads one schema per segment, once per reader
    (`checked`): the Arrow copy's where there is one (the copy a query reads its cells from;
    pyarrow.parquet then stays unimported), else the Parquet footer."""
    checked = set() if checked is None else checked
    for record in manifest.segments:
        if not record.parts:
            continue
        name = f"{SEGMENTS_DIR}/{record.name}/{part_file_names(0)[2]}"
        if record.metadata_arrow:
            name = f"{SEGMENTS_DIR}/{record.name}/{part_arrow_name(0)}"
        status = _stat(folder.path / name)
        key = (
            "columns",
            name,
            manifest.text_column,
            manifest.id_column,
            *((status.st_size, status.st_mtime_ns, status.st_ino) if status else ()),
        )
        if key in checked:
            continue
        problem = _column_problem(manifest, _stored_columns(folder.path / name), record.name)
        if problem:
            raise DamagedIndexError(
                f"index {folder.name!r}: {problem}; the manifest was edited: roll back with "
                f"'semsearch rollback {folder.name} GENERATION' or rebuild the index with "
                "--overwrite"
            )
        checked.add(key)


def _stored_columns(path: Path) -> list[str]:
    """The column names of a metadata part: an Arrow IPC file or a Parquet file."""
    if path.suffix == ".arrow":
        import pyarrow as pa

        with pa.memory_map(str(path)) as source:
            return pa.ipc.open_file(source).schema.names
    import pyarrow.parquet as pq

    return pq.read_schema(path).names


def _column_problem(manifest: Manifest, columns: list[str], segment: str) -> str | None:
    record = generation_file(Path(), manifest.generation)
    for role, name in (("text", manifest.text_column), ("id", manifest.id_column)):
        if name is not None and name not in columns:
            shown = ", ".join(column for column in columns if not column.startswith("_semsearch"))
            return (
                f"{record} names {name!r} as the {role} column, but segment {segment}'s "
                f"stored metadata has no such column (its columns: {shown})"
            )
    return None


def _changed(folder: IndexFolder, problem: str) -> DamagedIndexError:
    return DamagedIndexError(
        f"index {folder.name!r}: {problem}; the file changed after semsearch wrote it: run "
        f"'semsearch verify {folder.name}' to find a generation to roll back to, or rebuild "
        "the index with --overwrite"
    )


def verify_index(folder: IndexFolder, generation: int | None = None) -> VerifyReport:
    """Check every file of the current generation (or `generation`) in full; see the module
    docstring. Never raises for damage: the report says what is wrong."""
    started = time.perf_counter()
    try:
        manifest = folder.manifest(generation)
    except SemsearchError as exc:
        return VerifyReport(folder.name, generation, "damaged", problems=[str(exc)])
    report = VerifyReport(folder.name, manifest.generation, "ok")
    results: dict[str, str | None] = {}
    if generation is None:
        report.problems += _record_problems(folder, manifest)
    report.problems += _file_problems(folder, manifest, results)
    if not report.problems:
        report.problems += _structure_problems(folder, manifest)
    report.files = len(manifest.file_names())
    report.bytes = sum(
        status.st_size
        for name in manifest.file_names()
        if (status := _stat(folder.path / name)) is not None
    )
    if report.problems:
        report.status = "damaged"
        report.rollback_to = _verifying_generation(folder, manifest.generation, results)
    elif manifest.files is None:
        report.status = "unchecked"
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def check_restorable(folder: IndexFolder, generation: int) -> None:
    """Refuse to make `generation` current again when its files fail a full verify: a
    rollback that succeeded onto damaged files would leave an index every query refuses.
    A generation written before checksums were recorded is checked by sizes and row counts."""
    report = verify_index(folder, generation)
    if report.status == "damaged":
        raise SemsearchError(f"cannot roll back: {report.line()}")


def record_checksums(folder: IndexFolder) -> Manifest:
    """Hash the files of an index written before checksums were recorded, after checking
    their sizes and row counts, and record them in a new generation."""
    started = time.perf_counter()
    with folder.writer_lock("verify --record"):
        manifest = folder.manifest()
        if manifest.files is not None:
            return manifest
        report = verify_index(folder)
        if report.status == "damaged":
            raise SemsearchError(report.line())
        new = next_generation(
            manifest,
            list(manifest.segments),
            {"kind": "record-checksums"},
            time.perf_counter() - started,
        )
        write_manifest(folder.path, new)
        return folder.manifest()


def _record_problems(folder: IndexFolder, manifest: Manifest) -> list[str]:
    """manifest.json must be a copy of its generation's record."""
    record = generation_file(folder.path, manifest.generation)
    try:
        same = load_record(record) == manifest
    except (OSError, ValueError) as exc:
        return [f"{record.relative_to(folder.path)} cannot be read ({exc})"]
    except Exception as exc:  # noqa: BLE001 - another format version: report, do not crash
        return [f"{record.relative_to(folder.path)} cannot be read ({type(exc).__name__})"]
    return [] if same else [f"manifest.json differs from {record.relative_to(folder.path)}"]


def _file_problems(
    folder: IndexFolder, manifest: Manifest, results: dict[str, str | None]
) -> list[str]:
    problems = []
    for name in manifest.file_names():
        if name not in results:
            results[name] = _file_problem(folder.path / name, name, manifest)
        if results[name]:
            problems.append(results[name])
    return problems


def _file_problem(path: Path, name: str, manifest: Manifest) -> str | None:
    status = _stat(path)
    if manifest.files is None:  # an older index: only the FAISS files' sizes are recorded
        sizes = {f"segments/{s.name}/{s.index_file}": s.index_file_bytes for s in manifest.segments}
        return _size_problem(name, status, {"bytes": sizes[name]} if name in sizes else {})
    recorded = manifest.files.get(name)
    return _size_problem(name, status, recorded) or _content_problem(path, name, recorded)


def _structure_problems(folder: IndexFolder, manifest: Manifest) -> list[str]:
    """Row counts of ids, metadata and FAISS files, and the FAISS files' metric."""
    import pyarrow.parquet as pq

    from semsearch.store.segment import Segment

    problems = []
    for record in manifest.segments:
        segment = Segment(folder.segment_dir(record.name), record)
        try:
            segment.ids  # noqa: B018 - checks the stored rows against the manifest
            columns = segment.schema().names if record.parts else []
            if record.parts and (column := _column_problem(manifest, columns, record.name)):
                problems.append(column)
            segment.deleted_ids()
            segment.read_index(manifest.index.metric)
            if record.lexical_dir is not None:
                from semsearch.store.lexical import LexicalPart

                LexicalPart.read(segment.folder / record.lexical_dir, record.rows)
            for part, ids in enumerate(segment.part_ids):
                path = segment.folder / f"part-{part:05d}.parquet"
                if pq.ParquetFile(path).metadata.num_rows != len(ids):
                    problems.append(
                        f"{path.relative_to(folder.path)} holds another number of rows than its ids"
                    )
                if record.documents and (problem := _documents_problem(segment, part)):
                    problems.append(f"{path.relative_to(folder.path)} {problem}")
        except SemsearchError as exc:
            problems.append(str(exc).split(": roll back")[0].split("; roll back")[0])
        except Exception as exc:  # noqa: BLE001 - an unreadable file is a finding, not a crash
            problems.append(f"segment {record.name} cannot be read ({type(exc).__name__}: {exc})")
    return problems


def _documents_problem(segment, part: int) -> str | None:
    """Whether each chunk row of a chunked part points at a row of its documents table."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from semsearch.store.documents import DOCUMENT_ROW_COLUMN

    rows = pq.read_table(segment.metadata_paths()[part], columns=[DOCUMENT_ROW_COLUMN])
    documents = pq.ParquetFile(segment.documents_paths()[part]).metadata.num_rows
    column = rows.column(0)
    bounds = pc.min_max(column).as_py() if len(column) else {"min": 0, "max": -1}
    if column.null_count or bounds["min"] < 0 or bounds["max"] >= documents:
        return f"points at documents its documents table ({documents} rows) does not hold"
    return None


def _verifying_generation(
    folder: IndexFolder, damaged: int, results: dict[str, str | None]
) -> int | None:
    """The newest generation before `damaged` whose record and files all verify."""
    for number in reversed([n for n in folder.generations() if n < damaged]):
        try:
            manifest = folder.manifest(number)
        except SemsearchError:
            continue
        if manifest.files is not None and not _file_problems(folder, manifest, results):
            return number
    return None


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def _size_problem(name: str, status: os.stat_result | None, recorded: dict | None) -> str | None:
    if status is None:
        return f"{name} is missing"
    if recorded is None:
        return f"{name} is not in the manifest's list of checksums"
    if "bytes" in recorded and status.st_size != recorded["bytes"]:
        return f"{name} is {status.st_size} bytes, the manifest records {recorded['bytes']} (truncated or replaced)"
    return None


def _content_problem(path: Path, name: str, recorded: dict) -> str | None:
    try:
        actual = file_digest(path)
    except OSError as exc:
        return f"{name} cannot be read ({type(exc).__name__})"
    if actual != recorded[HASH_NAME]:
        return f"{name} has the recorded size but not the recorded {HASH_NAME} hash (its content changed)"
    return None
