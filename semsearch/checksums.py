"""Sizes and fast hashes of an index's files, and of a manifest's own content; the sha256 of
source files and model weights.

The hash is XXH3-128 (`xxhash`): 7 ms for a cached 100 MB file, against 57 ms for sha256,
so checking the files an open reads anyway adds little. It catches accidents and edits (a
zeroed block, a swapped file), not a forger, who could recompute it. A cache file whose hash
was checked is stamped with its inode's identity and times, so a later check of the same,
untouched inode is a `stat` (a cold query checks 180 MB of cached model files: 40 ms).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import xxhash

from semsearch.errors import SemsearchError

HASH_NAME = "xxh3"


def file_digest(path: Path) -> str:
    """The XXH3-128 of a file's bytes, as 32 hex digits."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, xxhash.xxh3_128).hexdigest()


def content_digest(data: dict) -> str:
    """The XXH3-128 of a JSON object's canonical text (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return xxhash.xxh3_128(text.encode("utf-8")).hexdigest()


def describe_files(folder: Path, names: Iterable[str], known: dict[str, dict]) -> dict[str, dict]:
    """{name: {"bytes", "xxh3"}} for the files `names` under `folder`.

    Files are written once and never changed, so an entry already in `known` (the previous
    generation's record) is kept as it is and only new files are read and hashed.
    """
    described = {}
    for name in names:
        if name in known:
            described[name] = known[name]
            continue
        path = folder / name
        try:
            described[name] = {"bytes": path.stat().st_size, HASH_NAME: file_digest(path)}
        except OSError as exc:
            raise SemsearchError(
                f"{path} cannot be read to record its checksum ({type(exc).__name__}): the index "
                "is missing a file; roll back or rebuild it with --overwrite"
            ) from None
    return described


CACHE_RECORD_SUFFIX = ".record.json"


def cache_record_path(path: Path) -> Path:
    """Where the record of cache file `path` is kept: beside it, by the same writer."""
    return path.with_name(path.name + CACHE_RECORD_SUFFIX)


def write_cache_record(path: Path, recorded_as: Path | None = None) -> None:
    """Record the size and hash of cache file `path`, for `cache_file_problem` to check
    before the file is loaded. `recorded_as`: the name the file will have once renamed
    into place (a writer hashes its temporary file, then renames it, then nothing changes).

    The record names its file, so a whole entry copied over another's (file and record)
    does not pass either. Written through a temporary name: never half a record.
    """
    final = recorded_as or path
    record = {"file": final.name, "bytes": path.stat().st_size, HASH_NAME: file_digest(path)}
    target = cache_record_path(final)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
    temporary.write_text(json.dumps(record), encoding="utf-8")
    os.replace(temporary, target)


def cache_file_problem(path: Path) -> str | None:
    """None when cache file `path` is the one its writer recorded; else what is wrong, in a
    few words. Why: a swapped entry (another model's trace with the same signature) would
    change every answer without an error. The file is hashed unless its record's stamp says
    this very inode was hashed since it last changed (`_stamp`)."""
    try:
        record = json.loads(cache_record_path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "it has no record (written by an older semsearch, or by something else)"
    except (OSError, ValueError) as exc:
        return f"its record cannot be read ({type(exc).__name__})"
    if not isinstance(record, dict) or record.get("file") != path.name:
        return "its record belongs to another file"
    try:
        status = path.stat()
        if record.get(VERIFIED_KEY) == _identity(status) and status.st_size == record.get("bytes"):
            return None
        size, digest = status.st_size, file_digest(path)
    except OSError as exc:
        return f"it cannot be read ({type(exc).__name__})"
    if size != record.get("bytes") or digest != record.get(HASH_NAME):
        return "its content is not the recorded one (changed or replaced after it was written)"
    _stamp(path, record, status)
    return None


# Where a record keeps the identity of the inode whose hash was last found to match it.
VERIFIED_KEY = "verified_inode"
# A file changed this recently may change again within the same tick of the kernel's file
# clock, leaving its times as they were (git's "racily clean" entries): it is not stamped
# until it has been left alone this long, and is hashed until then.
SETTLED_S = 2.0


def _identity(status: os.stat_result) -> list[int]:
    """What changes whenever a file's bytes can have: another inode (a file renamed or copied
    over it), its size, or its change time, which every write, `touch` and rename sets and
    nothing can set back."""
    return [status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]


def _stamp(path: Path, record: dict, status: os.stat_result) -> None:
    """Record that `path`, as `status` finds it, has just matched its hash, so that the next
    check of the same untouched inode need not read it. Written through a temporary name;
    a read-only or full cache folder only means the next check hashes it again."""
    if time.time() - status.st_ctime < SETTLED_S:
        return
    record = {**record, VERIFIED_KEY: _identity(status)}
    target = cache_record_path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        temporary.write_text(json.dumps(record), encoding="utf-8")
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def stream_sha256(stream: BinaryIO) -> str:
    """The sha256 of a stream's bytes, read a MiB at a time (source files, model weights)."""
    digest = hashlib.sha256()
    for block in iter(lambda: stream.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | Path) -> str:
    """The sha256 of a local file: what a manifest records of its source, and of weights."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
