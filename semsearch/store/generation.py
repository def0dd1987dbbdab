"""Making the next generation's manifest from the current one."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from semsearch import __version__
from semsearch.checksums import describe_files
from semsearch.phases import PhaseReport, PhaseTimer
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


def timed_record(folder: Path, manifest: Manifest, timer: PhaseTimer) -> Manifest:
    """`manifest` ready to write: each new file's size and hash (phase `hash`, here so that
    it is timed too; `write_manifest` keeps them), then `with_time`."""
    with timer.phase("hash"):
        files = describe_files(folder, manifest.file_names(), manifest.files or {})
    return with_time(replace(manifest, files=files), timer.report())


def with_time(manifest: Manifest, report: PhaseReport) -> Manifest:
    """`manifest` stamped with the time that made it: its wall seconds, and where they went
    (the operation's `phases`: `semsearch.phases.PhaseReport.to_dict`)."""
    operation = {**manifest.operation, "phases": report.to_dict()}
    return replace(manifest, build_seconds=round(report.wall_s, 2), operation=operation)


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
