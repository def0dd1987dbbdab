"""Checking an index's files in full against the sizes and hashes its manifest records.

`verify_index` (`semsearch verify`) checks every file's size and hash, the FAISS files'
metric and row counts, and the manifest against its generation's record, and names the
newest earlier generation that verifies, to roll back to (every open makes the lighter
`file_checks`). An index written before checksums is checked by sizes and row counts;
`record_checksums` (`semsearch verify NAME --record`) records them in a new generation.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from semsearch.errors import SemsearchError
from semsearch.store.documents import DOCUMENT_ROW_COLUMN
from semsearch.store.file_checks import column_problem, content_problem, file_stat, size_problem
from semsearch.store.folders import IndexFolder
from semsearch.store.generation import next_generation
from semsearch.store.manifest import (
    Manifest,
    generation_file,
    load_record,
    write_manifest,
)
from semsearch.store.segment import Segment


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
        if (status := file_stat(folder.path / name)) is not None
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
    status = file_stat(path)
    if manifest.files is None:  # an older index: only the FAISS files' sizes are recorded
        sizes = {f"segments/{s.name}/{s.index_file}": s.index_file_bytes for s in manifest.segments}
        return size_problem(name, status, {"bytes": sizes[name]} if name in sizes else {})
    recorded = manifest.files.get(name)
    return size_problem(name, status, recorded) or content_problem(path, name, recorded)


def _structure_problems(folder: IndexFolder, manifest: Manifest) -> list[str]:
    """Row counts of ids, metadata and FAISS files, and the FAISS files' metric."""
    import pyarrow.parquet as pq

    problems = []
    for record in manifest.segments:
        segment = Segment(folder.segment_dir(record.name), record)
        try:
            segment.id_lookup  # noqa: B018 - checks the stored rows against the manifest
            columns = segment.schema().names if record.parts else []
            if record.parts and (column := column_problem(manifest, columns, record.name)):
                problems.append(column)
            segment.deleted_ids()
            segment.read_index(manifest.index.metric)
            if record.lexical_dir is not None:
                from semsearch.store.lexical import LexicalPart

                LexicalPart.read(segment.folder / record.lexical_dir, record.rows)
            for part, ids in enumerate(segment.part_ids):
                path = segment.metadata_paths()[part]
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


def _documents_problem(segment: Segment, part: int) -> str | None:
    """Whether each chunk row of a chunked part points at a row of its documents table."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

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
