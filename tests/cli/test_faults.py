"""Every writer on a full disk and on a read-only folder: one line, exit 2, the index as it
was (same generation, verified, answering), and nothing left behind.

The full disk is `semsearch.disk`'s seam (`SEMSEARCH_FAULT_DISK_FULL_AFTER`: commits fail
with ENOSPC past N bytes, free space reads as what is left), which always runs; one test
fills a real tmpfs, and the read-only folder is a read-only bind mount, where this user may
mount them (root); another runs `add` as an unprivileged user (setpriv)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from living_support import generated_table, write

from semsearch import disk
from semsearch.errors import NoSpaceError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions

WRITERS = {
    "add": lambda f: ["add", str(f / "new.parquet"), "--index", "docs"],
    "delete": lambda f: ["delete", "docs", "--ids", str(f / "ids.txt")],
    "compact": lambda f: ["compact", "docs"],
    "reindex": lambda f: ["reindex", "docs", "--index-type", "flat"],
    "tune": lambda f: ["tune", "docs", "--target-recall", "0.99", "--sample", "20"],
    "rollback": lambda f: ["rollback", "docs", "1"],
}


@pytest.fixture()
def index(cli, tmp_path):
    """An HNSW index `docs` of two segments (40 rows built, 10 added: generation 2), a file
    of 10 new rows and a file of ids to delete."""
    write(generated_table(40), tmp_path / "a.parquet")
    write(generated_table(10, start=40), tmp_path / "more.parquet")
    write(generated_table(10, start=50), tmp_path / "new.parquet")
    (tmp_path / "ids.txt").write_text("d1\nd2\n")
    built = cli(
        "build",
        str(tmp_path / "a.parquet"),
        *("--name", "docs", "--id-column", "doc", "--index-type", "hnsw"),
        *("--model", cli.model, "--out-dir", cli.index_dir),
    )
    assert built.exit_code == 0, built.output
    added = cli("add", str(tmp_path / "more.parquet"), "--index", "docs", *_at(cli))
    assert added.exit_code == 0, added.output
    cli.folder = tmp_path
    return cli


@pytest.fixture()
def disk_full(monkeypatch):
    """Turn the seam on: commits in this process fail once they hold more than N bytes."""

    def full_after(limit: int) -> None:
        monkeypatch.setenv(disk.FULL_AFTER_ENV, str(limit))
        disk.reset_fault_seam()

    yield full_after
    monkeypatch.delenv(disk.FULL_AFTER_ENV, raising=False)


def _error(result) -> str:
    """The one `error: ` line, last on stderr (after the progress of a model that loaded or
    rows that encoded before the disk filled): exit 2, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "unexpectedly" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and result.stderr.strip().endswith(errors[0]), result.stderr
    return errors[0]


def _at(cli) -> list[str]:
    return ["--index-dir", cli.index_dir]


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def _state(cli) -> tuple[int, set[str]]:
    """The index's generation and every path in its folder."""
    info = cli("info", "docs", *_at(cli), "--json")
    assert info.exit_code == 0, info.output
    return json.loads(info.stdout)["generation"], _files(Path(cli.index_dir) / "docs")


def _assert_unchanged(cli, before: tuple[int, set[str]]) -> None:
    """Same generation, same files (no temporary left), verified, answering queries."""
    os.environ.pop(disk.FULL_AFTER_ENV, None)
    assert _state(cli) == before
    verified = cli("verify", "docs", *_at(cli))
    assert verified.exit_code == 0, verified.output
    hits = cli("query", "a guitar", "--index", "docs", "-k", "3", *_at(cli), "--json")
    assert hits.exit_code == 0 and len(hits.stdout.splitlines()) == 3, hits.output


@pytest.mark.parametrize("writer", WRITERS)
def test_a_full_disk_stops_each_writer_in_one_line_and_leaves_the_index(
    index, disk_full, writer
) -> None:
    before = _state(index)
    disk_full(0)  # not a byte more
    line = _error(index(*WRITERS[writer](index.folder), *_at(index)))
    assert "no space" in line and str(Path(index.index_dir) / "docs") in line, line
    assert " is free" in line and "run" in line, line
    _assert_unchanged(index, before)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_disk_that_fills_while_writing_leaves_nothing_behind(
    index, disk_full, monkeypatch, writer
) -> None:
    """The early free-space checks off: each writer meets the full disk at its first file
    (a part, an index, a deletion list, the manifest) and removes what it wrote."""
    from semsearch.ingest import maintain, update

    for module in (maintain, update):
        monkeypatch.setattr(module, "check_free_space", lambda *args: None)
    before = _state(index)
    disk_full(0)
    line = _error(index(*WRITERS[writer](index.folder), *_at(index)))
    assert "no space left in" in line and "needed more than the 0 B free" in line, line
    assert "the index is unchanged" in line, line
    _assert_unchanged(index, before)


def test_an_add_that_fills_the_disk_half_way_removes_its_segment(index, disk_full) -> None:
    """The early check passes (vectors and index fit), the metadata does not: the add's
    temporary segment (`segments/.tmp-s*`, left behind before) is removed."""
    before = _state(index)
    disk_full(6_000)
    line = _error(index(*WRITERS["add"](index.folder), *_at(index)))
    assert "no space left in" in line and "'add' needed more than" in line, line
    assert "the index is unchanged" in line, line
    _assert_unchanged(index, before)


def test_an_add_that_cannot_fit_is_refused_before_it_encodes(index, disk_full) -> None:
    before = _state(index)
    disk_full(1_000)  # 10 rows of 32-d vectors and their HNSW index need about 3 KiB
    line = _error(index(*WRITERS["add"](index.folder), *_at(index)))
    assert "no space for adding 10 rows" in line and "nothing was written" in line, line
    _assert_unchanged(index, before)


def test_a_build_that_fills_the_disk_keeps_its_finished_parts_and_resumes(
    cli, tmp_path, disk_full, caplog
) -> None:
    write(generated_table(40), tmp_path / "a.parquet")
    options = BuildOptions(
        corpus=tmp_path / "a.parquet",
        name="docs",
        id_column="doc",
        model=cli.model,
        out_dir=Path(cli.index_dir),
        part_rows=8,
        device="cpu",
    )
    disk_full(14_000)  # a few 8-row parts fit, the rest and the index do not
    with pytest.raises(NoSpaceError) as raised:
        build_index(options)
    line = str(raised.value)
    assert "no space left in" in line and "finished parts" in line and "resume" in line, line
    kept = sorted(path.name for path in (Path(cli.index_dir) / ".docs.partial").rglob("*"))
    parts = {name.split(".")[0] for name in kept if name.startswith("part-")}
    # whole parts only (vectors, ids, metadata, Arrow copy), the build's state, no temporary
    assert set(kept) - {"segments", "s000000", "build_state.json"} == {
        f"{part}{suffix}" for part in parts for suffix in (".npy", ".ids.npy", ".parquet", ".arrow")
    }, kept
    assert 0 < len(parts) < 5 and f"its {len(parts)} finished parts" in line, line
    os.environ.pop(disk.FULL_AFTER_ENV)
    with caplog.at_level("WARNING"):
        build_index(options)
    assert "resuming" in caplog.text
    assert cli("verify", "docs", *_at(cli)).exit_code == 0


def test_a_build_that_cannot_fit_is_refused_before_it_encodes(cli, tmp_path, disk_full) -> None:
    write(generated_table(40), tmp_path / "a.parquet")
    disk_full(2_000)
    line = _error(
        cli("build", str(tmp_path / "a.parquet"), "--model", cli.model, "--out-dir", cli.index_dir)
    )
    assert "no space for build" in line and "nothing was written" in line, line
    assert not Path(cli.index_dir).exists() or not any(Path(cli.index_dir).iterdir())


@pytest.mark.parametrize("limit", [0, 600])  # the build's state, or its first part's file
def test_a_build_that_fills_the_disk_before_a_part_is_finished_leaves_nothing(
    cli, tmp_path, disk_full, monkeypatch, limit
) -> None:
    from semsearch.ingest import build

    monkeypatch.setattr(build, "check_free_space", lambda *args: None)
    write(generated_table(40), tmp_path / "a.parquet")
    disk_full(limit)
    line = _error(
        cli("build", str(tmp_path / "a.parquet"), "--model", cli.model, "--out-dir", cli.index_dir)
    )
    assert "no space left in" in line and "nothing was kept" in line, line
    assert list(Path(cli.index_dir).iterdir()) == []


def test_mine_out_on_a_full_disk_leaves_no_file(cli, corpus_file, tmp_path, disk_full) -> None:
    out = tmp_path / "out" / "pairs.parquet"
    out.parent.mkdir()
    disk_full(0)
    mine = ["mine", str(corpus_file), "--model", cli.model, "--device", "cpu", "--out", str(out)]
    line = _error(cli(*mine))
    assert f"no space left in {out.parent}" in line and "'mine' stopped" in line, line
    assert list(out.parent.iterdir()) == []


def test_word_vectors_on_a_full_disk_leaves_no_file(cli, tmp_path, disk_full) -> None:
    out = tmp_path / "out" / "words.txt"
    disk_full(0)
    line = _error(cli("word-vectors", str(out), "--from-model", cli.model))
    assert f"no space left in {out.parent}: 'word-vectors' stopped" in line, line
    assert list(out.parent.iterdir()) == []


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture()
def read_only(index):
    """The index folder remounted read-only (a bind mount); skipped where mounting is not
    allowed."""
    folder = Path(index.index_dir) / "docs"
    if not (_mount("--bind", str(folder), str(folder))):
        pytest.skip("cannot make a bind mount here (needs root)")
    try:
        if not _mount("-o", "remount,bind,ro", str(folder)):
            pytest.skip("cannot remount read-only here")
        yield index
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_read_only_folder_refuses_each_writer_in_one_line_and_still_serves_reads(
    read_only, writer
) -> None:
    before = _state(read_only)
    line = _error(read_only(*WRITERS[writer](read_only.folder), *_at(read_only)))
    assert "read-only file system" in line and "the index is unchanged" in line, line
    _assert_unchanged(read_only, before)


def test_a_build_into_a_read_only_folder_is_refused_in_one_line(cli, tmp_path) -> None:
    write(generated_table(40), tmp_path / "a.parquet")
    out = tmp_path / "read-only"
    out.mkdir()
    if not _mount("--bind", str(out), str(out)):
        pytest.skip("cannot make a bind mount here (needs root)")
    try:
        if not _mount("-o", "remount,bind,ro", str(out)):
            pytest.skip("cannot remount read-only here")
        build = ["build", str(tmp_path / "a.parquet"), "--model", cli.model, "--out-dir", str(out)]
        line = _error(cli(*build))
        assert f"cannot write the index into {out} (Read-only file system)" in line, line
        assert list(out.iterdir()) == []
    finally:
        subprocess.run(["umount", "--lazy", str(out)], check=False)


def test_a_real_full_disk_stops_an_add_in_one_line(index, tmp_path) -> None:
    """A 1 MiB tmpfs filled to a few pages: numpy, pyarrow and FAISS fail in their own
    words, and each is told as a full disk."""
    mounted = tmp_path / "small"
    mounted.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mounted)):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        shutil.copytree(Path(index.index_dir) / "docs", mounted / "docs")
        index.index_dir = str(mounted)
        before = _state(index)
        filler = mounted / "filler"
        filler.write_bytes(b"\0" * (shutil.disk_usage(mounted).free - 12 * 1024))
        line = _error(index(*WRITERS["add"](index.folder), *_at(index)))
        assert "no space left in" in line and "the index is unchanged" in line, line
        filler.unlink()
        _assert_unchanged(index, before)
    finally:
        subprocess.run(["umount", "--lazy", str(mounted)], check=False)


def test_a_folder_this_user_may_not_write_to_refuses_add(index) -> None:
    """Run as `nobody` (root's file modes stop nothing): the add is refused in one line."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to run as another user")
    shared = Path(tempfile.mkdtemp(prefix="semsearch-faults-"))
    try:
        shutil.copytree(Path(index.index_dir), shared / "idx")
        shutil.copy(index.folder / "new.parquet", shared / "new.parquet")
        for path in [shared, *shared.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        command = [
            *("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"),
            *(sys.executable, "-m", "semsearch", "add", str(shared / "new.parquet")),
            *("--index", "docs", "--index-dir", str(shared / "idx")),
        ]
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HOME": str(shared)}
        result = subprocess.run(command, capture_output=True, text=True, env=environment)
        if "Permission denied" in result.stderr and "semsearch" not in result.stderr:
            pytest.skip("the unprivileged user cannot run this Python")
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "this user may not write there" in lines[0], result.stderr
        assert _files(shared / "idx" / "docs") == _files(Path(index.index_dir) / "docs")
    finally:
        shutil.rmtree(shared, ignore_errors=True)
