"""Sizes and fast hashes of an index's files, and of a manifest's own content.

The hash is xxHash's XXH3-128 (the `xxhash` package): on this project's machine it hashes
a cached 100 MB file in 7 ms (about 14 GB/s, against 82 ms for `hashlib.blake2b` and 57 ms
for sha256), so checking the files an open reads anyway adds little to opening them. It
catches accidents and edits (a zeroed block, a swapped file), not a deliberate forger, who
could recompute it; that is not what it is for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import xxhash

from semsearch.errors import SemsearchError

HASH_NAME = "xxh3"
BLOCK_BYTES = 1 << 20


def file_digest(path: Path) -> str:
    """The XXH3-128 of a file's bytes, as 32 hex digits."""
    digest = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()


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
