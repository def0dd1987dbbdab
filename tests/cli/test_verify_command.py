"""`verify`, `list` with broken and interrupted indexes, and `query --no-model-check`: the
tester's tamper cases end in one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line

from semsearch.checksums import content_digest


@pytest.fixture()
def built(cli, corpus_file):
    result = cli(
        "build",
        str(corpus_file),
        "--name",
        "docs",
        "--id-column",
        "doc_id",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
    )
    assert result.exit_code == 0, result.output
    cli.index = Path(cli.index_dir) / "docs"
    return cli


def _query(cli, *extra: str):
    return cli(
        "query",
        "guitar",
        "--index",
        "docs",
        "--index-dir",
        cli.index_dir,
        "--device",
        "cpu",
        *extra,
    )


def _edit_manifest(cli, change, keep_checksum: bool = False) -> None:
    path = cli.index / "manifest.json"
    data = json.loads(path.read_text())
    change(data)
    if keep_checksum:  # as if written so: the field checks and the model check, not the checksum
        data.pop("checksum")
        data["checksum"] = content_digest(data)
    path.write_text(json.dumps(data))


def test_verify_reports_a_healthy_index(built) -> None:
    result = built("verify", "docs", "--index-dir", built.index_dir)
    assert (
        result.exit_code == 0 and "generation 1:" in result.stdout and "verified" in result.stdout
    )
    record = json.loads(built("verify", "docs", "--index-dir", built.index_dir, "--json").stdout)
    assert record["status"] == "ok" and record["problems"] == []
    assert record["files"] == 10  # ids, metadata and its Arrow copy, vectors, FAISS, five BM25


def test_zeroed_bytes_in_the_faiss_file(built) -> None:
    path = built.index / "segments" / "s000000" / "index-g000001.faiss"
    with open(path, "r+b") as handle:
        handle.seek(64)
        handle.write(bytes(200))
    line = error_line(_query(built))
    assert "index-g000001.faiss has the recorded size but not the recorded xxh3 hash" in line
    line = error_line(built("verify", "docs", "--index-dir", built.index_dir))
    assert (
        "index-g000001.faiss" in line
        and "rebuild it with 'semsearch build CORPUS --name docs --overwrite'" in line
    )


def test_metadata_swapped_for_a_file_with_as_many_rows(built) -> None:
    path = built.index / "segments" / "s000000" / "part-00000.parquet"
    table = pq.read_table(path)
    pq.write_table(
        table.set_column(1, "text", pa.array(table.column("text").to_pylist()[::-1])), path
    )
    assert "part-00000.parquet" in error_line(_query(built))
    result = built("verify", "docs", "--index-dir", built.index_dir, "--json")
    assert json.loads(result.stdout.splitlines()[0])["status"] == "damaged"
    assert "part-00000.parquet" in error_line(result)


def test_metric_edited_from_cosine_to_l2(built) -> None:
    _edit_manifest(built, lambda data: data["index"].update(metric="l2"))
    line = error_line(_query(built))
    assert "edited after semsearch wrote it" in line and "semsearch rollback docs 1" in line
    assert built("rollback", "docs", "1", "--index-dir", built.index_dir).exit_code == 0
    assert _query(built, "--json").exit_code == 0  # generation 2: generation 1's record again


def test_fingerprint_emptied(built) -> None:
    _edit_manifest(built, lambda data: data["model"].update(fingerprint=""), keep_checksum=True)
    assert "--no-model-check" in error_line(_query(built))
    result = _query(built, "--no-model-check", "--json")
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 10


def test_a_garbage_field_is_named(built) -> None:
    _edit_manifest(built, lambda data: data["model"].update(max_length=0), keep_checksum=True)
    assert "field model.max_length = 0" in error_line(_query(built))


def test_list_shows_broken_indexes_and_interrupted_builds(built, corpus_file) -> None:
    result = built(
        "build",
        str(corpus_file),
        "--name",
        "second",
        "--model",
        built.model,
        "--out-dir",
        built.index_dir,
        "--device",
        "cpu",
    )
    assert result.exit_code == 0, result.output
    (built.index / "manifest.json").write_text("{garbage")
    partial = Path(built.index_dir) / ".half.partial"
    partial.mkdir()
    listing = built("list", "--index-dir", built.index_dir)
    assert listing.exit_code == 0, listing.output
    lines = listing.stdout.splitlines()
    assert lines[0].startswith("second") and lines[1].startswith("docs") and "broken:" in lines[1]
    assert "interrupted: a build stopped" in lines[2] and f"rm -rf {partial}" in lines[2]
    records = [
        json.loads(line)
        for line in built("list", "--index-dir", built.index_dir, "--json").stdout.splitlines()
    ]
    assert [(r["name"], r["status"]) for r in records] == [
        ("second", "ok"),
        ("docs", "broken"),
        ("half", "interrupted"),
    ]
    assert "manifest.json is damaged" in records[1]["reason"]


def test_list_and_verify_start_quickly(built) -> None:
    for command in (["list"], ["verify", "docs"]):
        started = time.perf_counter()
        process = subprocess.run(
            [sys.executable, "-m", "semsearch", *command, "--index-dir", built.index_dir],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert process.returncode == 0, process.stderr
        assert time.perf_counter() - started < 3  # < 0.5 s unloaded; generous on a busy machine


def test_verify_names_an_edited_record_once(built) -> None:
    _edit_manifest(built, lambda data: data["index"].update(metric="l2"))
    line = error_line(built("verify", "docs", "--index-dir", built.index_dir))
    assert (
        "edited after semsearch wrote it" in line and line.count("semsearch rollback docs 1") == 1
    )


def _zero_tail(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-32:] = bytes(32)
    path.write_bytes(bytes(data))


def test_vectors_changed_in_place_are_refused_by_a_filtered_query(built) -> None:
    _zero_tail(built.index / "segments" / "s000000" / "part-00000.npy")
    assert _query(built).exit_code == 0  # an unfiltered search reads no stored vector
    line = error_line(_query(built, "--where", "topic = 'pets'"))
    assert "part-00000.npy has the recorded size but not the recorded xxh3" in line


def test_rollback_to_a_damaged_generation_is_one_line_and_changes_nothing(built) -> None:
    deleted = built("delete", "docs", "--where", "topic = 'pets'", "--index-dir", built.index_dir)
    assert deleted.exit_code == 0, deleted.output
    _zero_tail(built.index / "segments" / "s000000" / "part-00000.npy")
    before = sorted(path.name for path in (built.index / "generations").iterdir())
    line = error_line(built("rollback", "docs", "1", "--index-dir", built.index_dir))
    assert line.startswith("error: cannot roll back: index 'docs' generation 1: ")
    assert sorted(path.name for path in (built.index / "generations").iterdir()) == before
