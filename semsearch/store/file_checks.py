"""Checking the files a reader or writer opens against the sizes and hashes the manifest records.

Every search snapshot checks the size of every file of its generation and hashes the files
an open reads whole anyway (ids, metadata, FAISS files, deletions): XXH3 runs at about
14 GB/s from the page cache, and it catches a same-size edit of the files that decide the
answers, with no state written into the index folder. Vectors are memory-mapped and read
piecemeal, so an open checks their size only; whatever reads them as vectors hashes them
first, once per reader (`check_vector_files`). `semsearch.store.verify` hashes everything.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from semsearch.checksums import HASH_NAME, file_digest
from semsearch.errors import DamagedIndexError
from semsearch.store.file_names import SEGMENTS_DIR, part_arrow_name, part_file_names
from semsearch.store.folders import IndexFolder
from semsearch.store.manifest import Manifest, SegmentRecord, generation_file
from semsearch.store.segment import stored_schema

log = logging.getLogger(__name__)


def check_opened_files(
    folder: IndexFolder,
    manifest: Manifest,
    checked: set[tuple] | None = None,
    vectors: bool = False,
) -> None:
    """Refuse a generation whose files differ from its record in size, or (those an open
    reads whole) in content. `checked`: the files this reader already hashed, by name and
    stat. `vectors`: hash the stored vectors too, for a writer that copies them all into a
    new generation (reindex, compact)."""
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
    record in size or hash: what reads them as vectors calls this first, as an open checks
    only their size. `checked` as in `check_opened_files`."""
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
        status = file_stat(folder.path / name)
        problem = size_problem(name, status, manifest.files.get(name))
        key = (name, status.st_size, status.st_mtime_ns, status.st_ino) if status else None
        if problem is None and name in hashed and key not in checked:
            problem = content_problem(folder.path / name, name, manifest.files[name])
            if problem is None:
                checked.add(key)
        if problem:
            raise _changed(folder, problem)


def check_file(folder: IndexFolder, manifest: Manifest, name: str) -> None:
    """Refuse one file of the generation (a trained structure a writer starts from) whose size
    or hash is not the recorded one."""
    if manifest.files is not None:
        _check_names(folder, manifest, [name], {name}, None)


def _check_segment_columns(
    folder: IndexFolder, manifest: Manifest, checked: set[tuple] | None
) -> None:
    """Refuse a generation whose manifest names a text or id column that a segment's stored
    metadata lacks (a hand-edited manifest with a recomputed checksum would pass every other
    check, then fail each search). One schema per segment, once per reader (`checked`)."""
    checked = set() if checked is None else checked
    for record in manifest.segments:
        if not record.parts:
            continue
        name = f"{SEGMENTS_DIR}/{record.name}/{part_file_names(0)[2]}"
        if record.metadata_arrow:
            name = f"{SEGMENTS_DIR}/{record.name}/{part_arrow_name(0)}"
        status = file_stat(folder.path / name)
        key = (
            "columns",
            name,
            manifest.text_column,
            manifest.id_column,
            *((status.st_size, status.st_mtime_ns, status.st_ino) if status else ()),
        )
        if key in checked:
            continue
        columns = stored_schema(folder.path / name).names
        problem = column_problem(manifest, columns, record.name)
        if problem:
            raise DamagedIndexError(
                f"index {folder.name!r}: {problem}; the manifest was edited: roll back with "
                f"'semsearch rollback {folder.name} GENERATION' or rebuild the index with "
                "--overwrite"
            )
        checked.add(key)


def column_problem(manifest: Manifest, columns: list[str], segment: str) -> str | None:
    """Why a segment's stored `columns` cannot be the manifest's (a text or id column it lacks)."""
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


def file_stat(path: Path) -> os.stat_result | None:
    """The file's stat, or None where it is missing or unreadable."""
    try:
        return path.stat()
    except OSError:
        return None


def size_problem(name: str, status: os.stat_result | None, recorded: dict | None) -> str | None:
    """Why a file (`status`) is not the one `recorded`: missing, unlisted, another size."""
    if status is None:
        return f"{name} is missing"
    if recorded is None:
        return f"{name} is not in the manifest's list of checksums"
    if "bytes" in recorded and status.st_size != recorded["bytes"]:
        return f"{name} is {status.st_size} bytes, the manifest records {recorded['bytes']} (truncated or replaced)"
    return None


def content_problem(path: Path, name: str, recorded: dict) -> str | None:
    """Why a file's content is not the one `recorded`: unreadable, another hash."""
    try:
        actual = file_digest(path)
    except OSError as exc:
        return f"{name} cannot be read ({type(exc).__name__})"
    if actual != recorded[HASH_NAME]:
        return f"{name} has the recorded size but not the recorded {HASH_NAME} hash (its content changed)"
    return None
