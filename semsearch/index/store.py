"""Index folders on disk: where they live, which exist, their generations and their writer lock.

    indexes/<name>/
      manifest.json          the current generation's record (see `manifest`)
      generations/g*.json    every generation's record
      segments/s*/           append-only segments (see `segment`)
      trained/*.faiss        trained, empty structures that new segments start from
      .lock                  held by the one process changing the index

A build writes into `.<name>.partial/` beside the final folder and renames it at the end,
so a folder named `<name>` is always complete. Later changes write new files and a new
generation; a writer killed at any point leaves files no generation names, which the
next writer removes.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from semsearch.errors import SemsearchError
from semsearch.index.manifest import (
    GENERATIONS_DIR,
    MANIFEST_FILE,
    Manifest,
    generation_file,
    generation_numbers,
    read_manifest,
)

log = logging.getLogger(__name__)

DEFAULT_INDEX_DIR = Path("indexes")
SEGMENTS_DIR = "segments"
TRAINED_DIR = "trained"
LOCK_FILE = ".lock"
PARTIAL_SUFFIX = ".partial"
MAX_NAME_LENGTH = 128


@dataclass(frozen=True)
class IndexFolder:
    """The paths of one index folder."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def manifest_file(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def segments_dir(self) -> Path:
        return self.path / SEGMENTS_DIR

    def segment_dir(self, name: str) -> Path:
        return self.segments_dir / name

    def trained_path(self, name: str) -> Path:
        return self.path / TRAINED_DIR / name

    def manifest(self, generation: int | None = None) -> Manifest:
        return read_manifest(self.path, generation)

    def generations(self) -> list[int]:
        return generation_numbers(self.path)

    def size_bytes(self) -> int:
        return sum(path.stat().st_size for path in self.path.rglob("*") if path.is_file())

    @contextlib.contextmanager
    def writer_lock(self, operation: str) -> Iterator[None]:
        """Hold the index's writer lock; a second writer gets a clear error, never waits.

        The lock is an `flock`, so the kernel releases it when its holder dies (kill -9
        included) and the next writer can clean up after it.
        """
        path = self.path / LOCK_FILE
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole block
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise SemsearchError(
                    f"index {self.name!r} is being changed by {holder}: wait for it to finish, "
                    f"then run {operation!r} again"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()} ({operation})")
            handle.flush()
            remove_leftovers(self)
            yield
        finally:
            handle.close()


def remove_leftovers(folder: IndexFolder) -> None:
    """Delete what an interrupted writer left: files that no recorded generation names."""
    current = folder.manifest().generation
    for number in folder.generations():
        if number > current:
            generation_file(folder.path, number).unlink(missing_ok=True)
    referenced_segments: dict[str, set[str]] = {}
    trained: set[str] = set()
    for number in folder.generations():
        manifest = folder.manifest(number)
        if manifest.index.trained_file:
            trained.add(manifest.index.trained_file)
        for segment in manifest.segments:
            names = referenced_segments.setdefault(segment.name, set())
            names.add(segment.index_file)
            if segment.deleted_file:
                names.add(segment.deleted_file)
    for path in _children(folder.segments_dir):
        if path.name not in referenced_segments:
            log.info("removing %s, left by an interrupted change", path)
            shutil.rmtree(path, ignore_errors=True)
            continue
        for file in path.iterdir():
            unreferenced = file.name.startswith(("index-", "deleted-")) and (
                file.name not in referenced_segments[path.name]
            )
            if unreferenced or file.name.startswith("."):
                file.unlink(missing_ok=True)
    for path in _children(folder.path / TRAINED_DIR):
        if path.name not in trained:
            path.unlink(missing_ok=True)
    for path in [*_children(folder.path / GENERATIONS_DIR), folder.path / f".{MANIFEST_FILE}.tmp"]:
        if path.name.startswith(".") and path.exists():
            path.unlink(missing_ok=True)


def list_indexes(index_dir: Path = DEFAULT_INDEX_DIR) -> list[IndexFolder]:
    """Complete index folders under `index_dir`, most recently changed first."""
    if not index_dir.is_dir():
        return []
    folders = [
        IndexFolder(path)
        for path in index_dir.iterdir()
        if path.is_dir() and not path.name.startswith(".") and (path / MANIFEST_FILE).is_file()
    ]
    return sorted(folders, key=lambda folder: folder.manifest_file.stat().st_mtime, reverse=True)


def find_index(name: str | None, index_dir: Path = DEFAULT_INDEX_DIR) -> IndexFolder:
    """The index called `name`, or with no name the only (or the most recent) one."""
    if index_dir.exists() and not index_dir.is_dir():
        raise SemsearchError(f"--index-dir {index_dir} is a file, not a folder of indexes")
    available = list_indexes(index_dir)
    if name is None:
        if not available:
            raise SemsearchError(
                f"there is no index in {index_dir}/: build one with 'semsearch build CORPUS'"
            )
        return available[0]
    candidate = Path(name).expanduser()
    if candidate.is_dir() and (candidate / MANIFEST_FILE).is_file():
        return IndexFolder(candidate)
    for folder in available:
        if folder.name == name:
            return folder
    there = ", ".join(folder.name for folder in available) or "none"
    raise SemsearchError(f"no index named {name!r} in {index_dir}/ (indexes there: {there})")


def partial_folder(index_dir: Path, name: str) -> Path:
    """Where a build of `name` writes until it is complete (and where an interrupted one waits)."""
    return index_dir / f".{name}{PARTIAL_SUFFIX}"


def check_name(name: str) -> None:
    usable = name and not name.startswith(".") and "/" not in name and "\\" not in name
    if not usable or len(name) > MAX_NAME_LENGTH or not name.isprintable():
        raise SemsearchError(
            f"index name {name!r} is not usable: use up to {MAX_NAME_LENGTH} letters, digits, - and _"
        )


def publish(partial: Path, final: Path, overwrite: bool) -> None:
    """Move a finished build into place; an existing index is replaced only when asked."""
    if final.exists() and not overwrite:
        raise SemsearchError(
            f"index {final.name!r} already exists in {final.parent}/: pass --overwrite to replace it"
        )
    retired = final.with_name(f".{final.name}.old")
    if final.exists():
        shutil.rmtree(retired, ignore_errors=True)
        final.rename(retired)
    partial.rename(final)
    shutil.rmtree(retired, ignore_errors=True)


def _children(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.is_dir() else []
