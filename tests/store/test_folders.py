"""Finding index folders, refusing damaged ones, the writer lock and leftover cleanup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from living_support import build, generated_table, write

from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.search.searcher import Searcher
from semsearch.store.folders import (
    IndexFolder,
    find_index,
    list_indexes,
    remove_leftovers,
    scan_indexes,
)
from semsearch.store.manifest import generation_file
from semsearch.store.segment import Segment

# Takes the writer lock of the index folder given as argv[1], says so, and holds it.
HOLD_THE_LOCK = """
import sys, time
from pathlib import Path
from semsearch.store.folders import IndexFolder
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


def overwrite_while_opening(
    tmp_path, encoder, seconds: float = 3.0, min_builds: int = 6
) -> tuple[int, int, list]:
    """Rebuild index `docs` with --overwrite in a loop (two corpora of different sizes, so
    a mixed open sees sizes that disagree) while this thread opens and searches it; the
    number of opens, of builds, and the errors of the opens."""
    out = tmp_path / "idx"
    corpora = [write(generated_table(rows), tmp_path / f"c{rows}.parquet") for rows in (12, 70)]
    build(corpora[0], out, encoder)
    stop, builds, failures, opens = threading.Event(), [0], [], 0

    def overwrite() -> None:
        while not stop.is_set():
            build(corpora[builds[0] % 2], out, encoder, overwrite=True)
            builds[0] += 1

    writer = threading.Thread(target=overwrite)
    writer.start()
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline or builds[0] < min_builds:
            try:
                [hits] = Searcher(find_index("docs", out), encoder=encoder).search(["guitar"], k=3)
                assert len(hits) == 3
            except Exception as exc:  # noqa: BLE001 - unfixed, a mixed open also raised IndexError
                failures.append(f"{type(exc).__name__}: {exc}")
            opens += 1
    finally:
        stop.set()
        writer.join()
    return opens, builds[0], failures


def test_opening_while_build_overwrite_replaces_the_index(tmp_path, tiny_encoder) -> None:
    opens, builds, failures = overwrite_while_opening(tmp_path, tiny_encoder)
    assert failures == [] and builds >= 6 and opens >= 20


def test_the_default_index_is_the_most_recently_built_not_the_last_changed(
    tmp_path, tiny_encoder
) -> None:
    from semsearch.ingest.maintain import retune

    out = tmp_path / "idx"
    corpus = write(generated_table(40), tmp_path / "a.parquet")
    older = build(corpus, out, tiny_encoder, index="IVF4,Flat", name="older", target_recall=None)
    build(corpus, out, tiny_encoder, name="newer")
    retune(older, 0.9)  # a new generation of the older index: manifest.json is the newest file
    assert older.manifest().generation == 2
    assert [folder.name for folder in list_indexes(out)] == ["newer", "older"]
    assert find_index(None, out).name == "newer"


def test_scan_lists_broken_indexes_and_interrupted_builds(built, tmp_path) -> None:
    out = tmp_path / "idx"
    (out / "bad").mkdir()
    (out / "bad" / "manifest.json").write_text("{not json")
    partial = out / ".half.partial"
    segment = partial / "segments" / "s000000"
    segment.mkdir(parents=True)
    for part, rows in ((0, 5),):  # a complete part: its vectors and its rows' ids
        np.save(segment / f"part-{part:05d}.npy", np.zeros((rows, 4), np.float32))
        np.save(segment / f"part-{part:05d}.ids.npy", np.arange(rows, dtype=np.int64))
    (out / "notes").mkdir()  # not an index: left out
    entries = {entry.name: entry for entry in scan_indexes(out)}
    assert [entry.status for entry in scan_indexes(out)] == ["ok", "broken", "interrupted"]
    assert (
        "bad/manifest.json is damaged" in entries["bad"].reason
        and "\n" not in entries["bad"].reason
    )
    assert (
        "with 5 rows encoded and kept" in entries["half"].reason
        and f"rm -rf {partial}" in entries["half"].reason
    )
    np.save(segment / "part-00001.npy", np.zeros((7, 4), np.float32))
    np.save(segment / "part-00001.ids.npy", np.arange(5, 12, dtype=np.int64))
    reason = {e.name: e for e in scan_indexes(out)}["half"].reason
    assert "with 12 rows encoded and kept" in reason
    assert [folder.name for folder in list_indexes(out)] == ["docs"]
    assert find_index("bad", out).name == "bad"  # by name, so that opening it says what is wrong
    with pytest.raises(SemsearchError, match="is damaged"):
        find_index("bad", out).manifest()


def test_an_index_dir_that_is_a_file_is_named_as_such(tmp_path) -> None:
    a_file = tmp_path / "corpus.parquet"
    a_file.write_text("not a folder")
    for look in (lambda: scan_indexes(a_file), lambda: find_index("docs", a_file)):
        with pytest.raises(SemsearchError, match="is a file, not a folder of indexes"):
            look()
