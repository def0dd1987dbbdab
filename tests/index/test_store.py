"""Finding index folders, refusing damaged ones, the writer lock and leftover cleanup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from semsearch.errors import SemsearchError
from semsearch.index.build import BuildOptions, build_index
from semsearch.index.manifest import generation_file
from semsearch.index.segment import Segment
from semsearch.index.store import IndexFolder, find_index, list_indexes, remove_leftovers

# Takes the writer lock of the index folder given as argv[1], says so, and holds it.
HOLD_THE_LOCK = """
import sys, time
from pathlib import Path
from semsearch.index.store import IndexFolder
with IndexFolder(Path(sys.argv[1])).writer_lock("add"):
    print("locked", flush=True)
    time.sleep(120)
"""


@pytest.fixture()
def built(corpus_file, tmp_path, tiny_encoder):
    options = BuildOptions(
        corpus=corpus_file, name="docs", out_dir=tmp_path / "idx", show_progress=False
    )
    return build_index(options, encoder=tiny_encoder)


def _segment(folder: IndexFolder) -> Segment:
    record = folder.manifest().segments[0]
    return Segment(folder.segment_dir(record.name), record)


def test_most_recent_index_is_the_default(built, corpus_file, tmp_path, tiny_encoder) -> None:
    options = BuildOptions(
        corpus=corpus_file, name="newer", out_dir=tmp_path / "idx", show_progress=False
    )
    build_index(options, encoder=tiny_encoder)
    assert [f.name for f in list_indexes(tmp_path / "idx")] == ["newer", "docs"]
    assert find_index(None, tmp_path / "idx").name == "newer"
    assert find_index("docs", tmp_path / "idx").name == "docs"


def test_missing_index_lists_the_ones_there_are(built, tmp_path) -> None:
    with pytest.raises(SemsearchError, match=r"no index named 'nope'.*docs"):
        find_index("nope", tmp_path / "idx")
    with pytest.raises(SemsearchError, match="semsearch build"):
        find_index(None, tmp_path / "empty")


def test_truncated_index_file_is_refused(built) -> None:
    segment = _segment(built)
    index_file = segment.folder / segment.record.index_file
    data = index_file.read_bytes()
    index_file.write_bytes(data[: len(data) // 2])
    with pytest.raises(SemsearchError, match="truncated"):
        segment.read_index(built.manifest().index.metric)


def test_corrupt_index_file_of_the_right_size_is_refused(built) -> None:
    segment = _segment(built)
    index_file = segment.folder / segment.record.index_file
    index_file.write_bytes(b"\x00" * index_file.stat().st_size)
    with pytest.raises(SemsearchError, match="corrupt"):
        segment.read_index(built.manifest().index.metric)


def test_damaged_manifest_is_refused(built) -> None:
    built.manifest_file.write_text("{not json")
    with pytest.raises(SemsearchError, match="damaged"):
        built.manifest()


def test_a_second_writer_is_refused_until_the_holder_dies(built) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, str(built.path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        refused = pytest.raises(SemsearchError, match=rf"being changed by pid {holder.pid} \(add\)")
        with refused, built.writer_lock("add"):
            pytest.fail("two writers held the lock at once")
        holder.kill()  # SIGKILL: no clean-up runs, the kernel drops the flock
        assert holder.wait(timeout=30) == -signal.SIGKILL
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
        holder.stdout.close()
    with built.writer_lock("add"):
        assert (built.path / ".lock").read_text() == f"pid {os.getpid()} (add)"


def test_leftovers_of_an_interrupted_writer_are_removed(built) -> None:
    current = built.manifest()
    orphan_segment = built.segments_dir / ".tmp-s000009"
    orphan_segment.mkdir()
    (orphan_segment / "part-00000.npy").write_bytes(b"half written")
    newer = generation_file(built.path, current.generation + 1)
    newer.write_text(json.dumps({**current.to_dict(), "generation": current.generation + 1}))
    orphan_index = built.segment_dir(current.segments[0].name) / "index-g000002.faiss"
    orphan_index.write_bytes(b"half written")

    remove_leftovers(built)
    assert not orphan_segment.exists() and not newer.exists() and not orphan_index.exists()
    assert built.generations() == [current.generation]
    assert built.manifest() == current
    assert _segment(built).read_index(current.index.metric).size == current.rows
