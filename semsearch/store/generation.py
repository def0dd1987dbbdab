"""Making the next generation's manifest from the current one."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from semsearch import __version__
from semsearch.store.manifest import Manifest, SegmentRecord


def next_generation(
    current: Manifest, segments: list[SegmentRecord], operation: dict, seconds: float, **changes
) -> Manifest:
    """`current` with new segments, one generation on, stamped with what made it. Its live
    documents are `changes["documents"]`, else the current ones (an unchunked index's: its rows)."""
    rows = sum(segment.live_rows for segment in segments)
    if current.chunks is None:
        changes["documents"] = rows
    return replace(
        current,
        generation=current.generation + 1,
        segments=tuple(segments),
        rows=rows,
        operation=operation,
        semsearch_version=__version__,
        created_at=now(),
        build_seconds=round(seconds, 2),
        **changes,
    )


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def segment_name(number: int) -> str:
    return f"s{number:06d}"


def next_segment_number(manifest: Manifest, existing: list[str]) -> int:
    """One more than any segment this index has ever had (names are never reused)."""
    numbers = [
        int(name[1:])
        for name in [*existing, *(s.name for s in manifest.segments)]
        if name.startswith("s") and name[1:].isdigit()
    ]
    return max(numbers, default=-1) + 1
