"""The names of an index folder's files: the segments' folder, each part's files, a segment's
lexical (BM25) files, and every file of one segment.

The manifest lists these names, and writers, readers and checks make the same paths from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semsearch.store.manifest import SegmentRecord

SEGMENTS_DIR = "segments"

# The files of a segment's lexical folder, as bm25s writes them (semsearch.store.lexical).
LEXICAL_FILES = (
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
    "vocab.index.json",
    "params.index.json",
)


def part_file_names(part: int) -> tuple[str, str, str]:
    """The files of a segment's part: vectors, ids, metadata (see `semsearch.store.segment`)."""
    return f"part-{part:05d}.npy", f"part-{part:05d}.ids.npy", f"part-{part:05d}.parquet"


def part_arrow_name(part: int) -> str:
    """A part's metadata again, as uncompressed Arrow IPC (see `semsearch.store.metadata_parts`)."""
    return f"part-{part:05d}.arrow"


def part_documents_names(part: int) -> tuple[str, str]:
    """A chunked part's documents table, Parquet and Arrow (see `semsearch.store.documents`)."""
    return f"part-{part:05d}.documents.parquet", f"part-{part:05d}.documents.arrow"


def part_names(part: int) -> tuple[str, ...]:
    """Every file a part may have (a chunked part's documents tables among them)."""
    return (*part_file_names(part), part_arrow_name(part), *part_documents_names(part))


def segment_file_names(segment: SegmentRecord, opened_only: bool = False) -> list[str]:
    """The files of one segment, as paths under the index folder (see `Manifest.file_names`)."""
    base = f"{SEGMENTS_DIR}/{segment.name}"
    names = []
    for part in range(segment.parts):
        vectors, ids, metadata = part_file_names(part)
        names += [f"{base}/{ids}", f"{base}/{metadata}"]
        if segment.metadata_arrow:
            names.append(f"{base}/{part_arrow_name(part)}")
        if segment.documents:
            names += [f"{base}/{name}" for name in part_documents_names(part)]
        if not opened_only:
            names.append(f"{base}/{vectors}")
    names.append(f"{base}/{segment.index_file}")
    if segment.deleted_file is not None:
        names.append(f"{base}/{segment.deleted_file}")
    if segment.lexical_dir is not None and not opened_only:  # read when first asked for
        names += [f"{base}/{segment.lexical_dir}/{name}" for name in LEXICAL_FILES]
    return names
