"""Merging segments part by part: every live row once, in id order, with its own vector and
metadata, whatever the part size and however the segments' ids interleave."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from living_support import build, generated_table, write

from semsearch.index import Index
from semsearch.ingest.build_options import DEFAULT_PART_ROWS as PART_ROWS
from semsearch.ingest.merge import merged_parts, write_merged
from semsearch.store.manifest import SegmentRecord
from semsearch.store.segment import ID_COLUMN, Segment, SegmentWriter


def _segments(index: Index) -> list[Segment]:
    manifest = index.folder.manifest()
    return [Segment(index.folder.segment_dir(r.name), r) for r in manifest.segments]


def _live_rows(segments: list[Segment]) -> dict[int, tuple[np.ndarray, dict]]:
    """Every live row by id: its vector and metadata, read whole (the reference)."""
    rows = {}
    for segment in segments:
        table, mask = segment.metadata(), segment.live_mask()
        for position in np.flatnonzero(mask):
            row = table.slice(int(position), 1).to_pylist()[0]
            rows[row[ID_COLUMN]] = (segment.vectors_at(np.array([position]))[0], row)
    return rows


@pytest.fixture()
def grown(tmp_path, tiny_encoder) -> Index:
    """Three segments whose ids interleave (replaced rows keep their ids), with deletions."""
    index = Index(
        build(
            write(generated_table(40), tmp_path / "a.parquet"),
            tmp_path / "idx",
            tiny_encoder,
            part_rows=7,
        )
    )
    changed = generated_table(10, start=5).set_column(
        1, "text", pa.array([f"changed {i}" for i in range(10)])
    )
    index.add(pa.concat_tables([changed, generated_table(6, start=40)]), encoder=tiny_encoder)
    index.add(
        generated_table(3, start=20).set_column(
            1, "text", pa.array(["again 0", "again 1", "again 2"])
        ),
        encoder=tiny_encoder,
    )
    index.delete(ids=["d1", "d7", "d41", "d21"])
    return index


@pytest.mark.parametrize("part_rows", [1, 4, 16, PART_ROWS])
def test_merged_parts_hold_every_live_row_once_in_id_order(grown, tmp_path, part_rows) -> None:
    segments = _segments(grown)
    expected = _live_rows(segments)
    writer = SegmentWriter(tmp_path / "merged")
    written = write_merged(segments, writer, segments[0].part_vectors(0).shape[1], part_rows)
    assert written == len(expected) == 46 - 4
    parts = writer.part_count()
    assert parts == -(-written // part_rows)
    merged = Segment(writer.folder, SegmentRecord("m", written, parts, "", 0))
    ids = np.concatenate(merged.part_ids)
    assert ids.tolist() == sorted(expected)
    table = merged.metadata()
    for position, row_id in enumerate(ids.tolist()):
        vector, row = expected[row_id]
        assert np.array_equal(merged.vectors_at(np.array([position]))[0], vector)
        assert table.slice(position, 1).to_pylist()[0] == row


def test_each_step_takes_the_smallest_ids_over_all_segments(grown) -> None:
    steps = list(merged_parts(_segments(grown), 5))
    ids = np.concatenate([step[0] for step in steps])
    assert np.all(np.diff(ids) > 0)
    assert [len(step[0]) for step in steps[:-1]] == [5] * (len(steps) - 1)
