"""Index folders on disk: where they live, which exist, their generations and their writer lock.

    indexes/<name>/
      manifest.json          the current generation's record (see `manifest`)
      generations/g*.json    every generation's record
      segments/s*/           append-only segments (see `segment`)
      trained/*.faiss        trained, empty structures that new segments start from
      .lock                  held by the one process changing the index

A build writes into `.<name>.partial/` and renames it at the end, so a folder named
`<name>` is always complete. A writer killed at any point leaves files no generation
names, which the next writer removes. An overwrite swaps whole folders (`publish`); a
reader notices by the folder's identity (`IndexFolder.identity`) and opens again.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shlex
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from semsearch.disk import disk_problems, is_not_writable, not_writable, remove
from semsearch.errors import SemsearchError
from semsearch.store.file_names import SEGMENTS_DIR, SLICE_FILES, SLICES_DIR
from semsearch.store.manifest import (
    GENERATIONS_DIR,
    MANIFEST_FILE,
    TRAINED_DIR,
    Manifest,
    created_at,
    generation_file,
    generation_numbers,
    read_manifest,
)

log = logging.getLogger(__name__)

DEFAULT_INDEX_DIR = Path("indexes")
LOCK_FILE = ".lock"
PARTIAL_SUFFIX = ".partial"
RETIRED_SUFFIX = ".old"
MAX_NAME_LENGTH = 128
# What a change that failed on a full disk or a read-only folder leaves, and what to do.
UNCHANGED = "the index is unchanged (queries, serve and verify still read it)"
COPY_TO_CHANGE = "copy it to a folder you can write to, to change it"
FREE_SPACE = "free some space and run the same command again"
# How long a lookup waits for an overwrite caught between its two renames (`publish`).
REPLACE_WAIT_SECONDS = 5.0


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

    def identity(self) -> tuple[int, int] | None:
        """(device, inode) of the folder, None while it is absent: an overwrite changes it."""
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return None
        return status.st_dev, status.st_ino

    @contextlib.contextmanager
    def writer_lock(self, operation: str) -> Iterator[None]:
        """Hold the index's writer lock; a second writer gets a clear error, never waits. An
        `flock`: the kernel releases it when its holder dies, and the next writer cleans up."""
        path = self.path / LOCK_FILE
        try:
            handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the block
        except OSError as exc:
            if not is_not_writable(exc):
                raise
            raise not_writable(self.path, repr(operation), exc, UNCHANGED, COPY_TO_CHANGE) from exc
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
            with disk_problems(self.path, repr(operation), kept=UNCHANGED, advice=FREE_SPACE):
                handle.flush()
                remove_leftovers(self)
                try:
                    yield
                except Exception:
                    remove_leftovers(self)  # what the failed change wrote: never left behind
                    raise
        finally:
            handle.close()


def remove_leftovers(folder: IndexFolder) -> None:
    """Delete what an interrupted writer left: files that no recorded generation names (none
    while a record cannot be read: its files would look unreferenced)."""
    try:
        current = folder.manifest().generation
        recorded = [folder.manifest(number) for number in folder.generations() if number <= current]
    except SemsearchError as exc:
        log.warning("not removing leftovers: %s", exc)
        return
    for number in folder.generations():
        if number > current:
            generation_file(folder.path, number).unlink(missing_ok=True)
    referenced_segments: dict[str, set[str]] = {}
    trained: set[str] = set()
    for manifest in recorded:
        if manifest.index.trained_file:
            trained.add(manifest.index.trained_file)
        for segment in manifest.segments:
            names = referenced_segments.setdefault(segment.name, set())
            names.add(segment.index_file)
            if segment.deleted_file:
                names.add(segment.deleted_file)
            if segment.lexical_dir:
                names.add(segment.lexical_dir)
    for path in _children(folder.segments_dir):
        if path.name not in referenced_segments:
            log.info("removing %s, left by an interrupted change", path)
            shutil.rmtree(path, ignore_errors=True)
            continue
        for file in path.iterdir():
            unreferenced = file.name.startswith(("index-", "deleted-", "lexical-")) and (
                file.name not in referenced_segments[path.name]
            )
            if (unreferenced or file.name.startswith(".")) and file.is_dir():
                shutil.rmtree(file, ignore_errors=True)  # a lexical folder
            elif unreferenced or file.name.startswith("."):
                file.unlink(missing_ok=True)
    for path in _children(folder.path / TRAINED_DIR):
        if path.name not in trained:
            path.unlink(missing_ok=True)
    for path in [*_children(folder.path / GENERATIONS_DIR), folder.path / f".{MANIFEST_FILE}.tmp"]:
        if path.name.startswith(".") and path.exists():
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class IndexEntry:
    """A folder of an index directory as `semsearch list` shows it: `status` ok, broken or
    interrupted (a build's partial folder), `reason` why and what to do."""

    name: str
    path: Path
    status: str
    manifest: Manifest | None = None
    reason: str = ""
    created_at: str = ""


def scan_indexes(index_dir: Path = DEFAULT_INDEX_DIR) -> list[IndexEntry]:
    """Every index, broken one and interrupted build under `index_dir`: readable indexes
    first, most recently created first (the first build's time, not the last change's)."""
    _check_index_dir(index_dir)
    if not index_dir.is_dir():
        return []
    entries = []
    for path in sorted(index_dir.iterdir()):
        if not path.is_dir():
            continue
        if path.name.startswith(".") and path.name.endswith(PARTIAL_SUFFIX):
            entries.append(_interrupted(path))
        elif not path.name.startswith(".") and (path / MANIFEST_FILE).is_file():
            try:
                manifest = read_manifest(path)
            except SemsearchError as exc:
                entries.append(IndexEntry(path.name, path, "broken", reason=str(exc)))
                continue
            entries.append(
                IndexEntry(path.name, path, "ok", manifest, created_at=created_at(path, manifest))
            )
    order = {"ok": 0, "broken": 1, "interrupted": 2}
    return sorted(entries, key=lambda e: (order[e.status], -_time(e.created_at)))


def list_indexes(index_dir: Path = DEFAULT_INDEX_DIR) -> list[IndexFolder]:
    """Readable index folders under `index_dir`, most recently created first."""
    return [IndexFolder(entry.path) for entry in scan_indexes(index_dir) if entry.status == "ok"]


def _check_index_dir(index_dir: Path) -> None:
    """Refuse an index folder that is a file, or a path the system cannot use (a name too
    long, a folder we may not read), in one line before anything is looked up in it."""
    try:
        status = index_dir.stat()
    except FileNotFoundError:
        return
    except OSError as exc:  # ENAMETOOLONG, EACCES, ELOOP...
        raise SemsearchError(
            f"--index-dir {shorten_path(index_dir)} cannot be used ({exc.strerror or exc}): "
            "give an existing folder or a shorter path"
        ) from None
    if not stat.S_ISDIR(status.st_mode):
        raise SemsearchError(f"--index-dir {index_dir} is a file, not a folder of indexes")


def shorten_path(path: Path | str, limit: int = 80) -> str:
    """A path fit for a one-line message: a long one keeps its head and tail and its length."""
    text = str(path)
    if len(text) <= limit:
        return text
    half = (limit - 20) // 2
    return f"{text[:half]}…{text[-half:]} ({len(text)} characters)"


def find_index(name: str | None, index_dir: Path = DEFAULT_INDEX_DIR) -> IndexFolder:
    """The index called `name`, or with no name the most recently created one; a lookup between
    the two renames of an overwrite (`publish`) waits for the new folder."""
    _check_index_dir(index_dir)
    deadline = time.monotonic() + REPLACE_WAIT_SECONDS
    while True:
        try:
            return _find_index(name, index_dir)
        except SemsearchError:
            if time.monotonic() > deadline or not _being_replaced(index_dir, name):
                raise
            time.sleep(0.01)
        except OSError as exc:  # a name too long for a path, a folder we may not read
            raise SemsearchError(
                f"cannot look for index {name!r} in {index_dir}/ ({exc.strerror or exc}): "
                "check the name and the folder"
            ) from exc


def _find_index(name: str | None, index_dir: Path) -> IndexFolder:
    if name is None:
        available = list_indexes(index_dir)
        if not available:
            raise SemsearchError(
                f"there is no index in {index_dir}/: build one with 'semsearch build CORPUS'"
            )
        return available[0]
    candidate = Path(name).expanduser()
    if candidate.is_dir() and (candidate / MANIFEST_FILE).is_file():
        return IndexFolder(candidate)
    if "/" not in name and (index_dir / name / MANIFEST_FILE).is_file():
        return IndexFolder(index_dir / name)  # a damaged one too: opening it says what is wrong
    there = ", ".join(folder.name for folder in list_indexes(index_dir)) or "none"
    raise SemsearchError(f"no index named {name!r} in {index_dir}/ (indexes there: {there})")


def _being_replaced(index_dir: Path, name: str | None) -> bool:
    """True while an overwrite has retired the old folder and not yet finished (`publish`)."""
    if name is not None:
        return (index_dir / f".{Path(name).name}{RETIRED_SUFFIX}").is_dir()
    return index_dir.is_dir() and any(
        path.name.startswith(".") and path.name.endswith(RETIRED_SUFFIX)
        for path in index_dir.iterdir()
    )


def _interrupted(path: Path) -> IndexEntry:
    name = path.name[1 : -len(PARTIAL_SUFFIX)]
    reason = (
        f"a build stopped with {kept_rows(path):,} rows encoded and kept: run the same "
        "'semsearch build' command again to resume it, or remove it with: "
        f"rm -rf {shlex.quote(str(path))}"
    )
    return IndexEntry(name, path, "interrupted", reason=reason)


def kept_rows(partial: Path) -> int:
    """Rows an interrupted build in `partial` encoded and kept (what a resumed build skips)."""
    return sum(encoded_rows(folder) for folder in (partial / SEGMENTS_DIR).glob("s*"))


def encoded_rows(segment_folder: Path) -> int:
    """Rows of a segment being built that are encoded: those of its complete parts and of
    the slices saved of the parts still being encoded."""
    import numpy as np  # here: listing indexes needs it only for interrupted builds

    total = 0
    for path in segment_folder.glob("part-[0-9][0-9][0-9][0-9][0-9].npy"):  # complete parts
        with contextlib.suppress(OSError, ValueError):
            total += len(np.load(path.with_suffix(".ids.npy"), mmap_mode="r"))
    for path in (segment_folder / SLICES_DIR).glob(SLICE_FILES):
        with contextlib.suppress(OSError, ValueError, KeyError), np.load(path) as saved:
            total += len(saved["positions"])
    return total


def _time(value: str) -> float:
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return 0.0


def partial_folder(index_dir: Path, name: str) -> Path:
    """Where a build of `name` writes until it is complete (and where an interrupted one waits)."""
    return index_dir / f".{name}{PARTIAL_SUFFIX}"


def keep_finished_parts(partial: Path, state_file: str) -> tuple[int, int]:
    """Remove from a build's partial folder all but its `state_file` and the first
    segment's complete parts (the part being written, indexes, temporaries go): what a build
    stopped by a full disk keeps to resume from. The parts and rows kept."""
    segments = partial / SEGMENTS_DIR
    for path in _children(partial):
        if path.name not in (state_file, SEGMENTS_DIR):
            remove(path)
    first = sorted(path.name for path in _children(segments))[:1]
    for path in _children(segments):
        if path.name not in first:
            remove(path)
    if not first:
        return 0, 0
    # Imported here: numpy and pyarrow stay out of every command's start-up.
    from semsearch.store.segment import SegmentWriter

    writer = SegmentWriter(segments / first[0])
    return writer.keep_finished_parts(), writer.rows_written()


def check_name(name: str) -> None:
    usable = name and not name.startswith(".") and "/" not in name and "\\" not in name
    usable = usable and len(name) <= MAX_NAME_LENGTH and name.isprintable()
    # A folder name has at most 255 bytes, and `.NAME.partial` needs 9 more than NAME.
    if not usable or len(name.encode("utf-8")) > 2 * MAX_NAME_LENGTH - 10:
        raise SemsearchError(
            f"index name {name!r} is not usable: use up to {MAX_NAME_LENGTH} letters, digits, - and _"
        )


def publish(partial: Path, final: Path, overwrite: bool) -> None:
    """Move a finished build into place; an existing index is replaced only when asked."""
    if final.exists() and not overwrite:
        raise SemsearchError(
            f"index {final.name!r} already exists in {final.parent}/: pass --overwrite to replace it"
        )
    retired = final.with_name(f".{final.name}{RETIRED_SUFFIX}")
    if final.exists():
        shutil.rmtree(retired, ignore_errors=True)
        final.rename(retired)
    partial.rename(final)
    shutil.rmtree(retired, ignore_errors=True)


def _children(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.is_dir() else []
