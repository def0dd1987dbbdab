"""Bad input to `--engine ray`: one line and exit status 2 each, and a partial build stays resumable."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line, runner
from distributed.conftest import ray_tests, write_corpus

from semsearch.cli.app import app
from semsearch.ingest import build as build_module
from semsearch.store.folders import partial_folder

pytestmark = ray_tests


def _build(*args: str):
    return runner.invoke(app, ["-q", "build", *args], catch_exceptions=False)


def test_an_unreachable_cluster_is_one_line_and_the_partial_build_stays(
    tmp_path, tiny_model_dir, monkeypatch
) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 200)
    common = [
        str(corpus),
        "--name",
        "docs",
        "--model",
        str(tiny_model_dir),
        "--out-dir",
        str(tmp_path / "idx"),
        "--index-type",
        "flat",
    ]

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "trained_index", stop)
    assert _build(*common).exit_code == 130  # interrupted after encoding: the parts are kept
    monkeypatch.undo()
    partial = partial_folder(tmp_path / "idx", "docs")
    before = sorted(path.name for path in partial.rglob("*"))
    line = error_line(_build(*common, "--engine", "ray", "--address", "127.0.0.1:9"))
    assert "cannot reach the Ray cluster at 127.0.0.1:9" in line
    assert "cannot connect to the Ray cluster" in error_line(
        _build(*common, "--engine", "ray", "--address", "auto")
    )
    assert sorted(path.name for path in partial.rglob("*")) == before
    resumed = _build(*common, "--engine", "ray", "--workers", "2")  # a Ray instance of its own
    assert resumed.exit_code == 0, resumed.output
    assert not partial.exists() and (tmp_path / "idx" / "docs" / "manifest.json").is_file()


def test_files_that_cannot_be_one_corpus_are_refused_before_ray_starts(tmp_path) -> None:
    folder = tmp_path / "data"
    write_corpus(folder / "a.parquet", 10)
    pq.write_table(
        pa.table({"doc_id": ["x"], "text": ["hello"], "n": ["one"]}), folder / "b.parquet"
    )
    line = error_line(_build(str(folder), "--engine", "ray", "--out-dir", str(tmp_path / "idx")))
    assert "'n' is string in b.parquet but int64 in a.parquet" in line
    line = error_line(_build(str(tmp_path / "none" / "*.parquet"), "--engine", "ray"))
    assert "no file matches" in line
    line = error_line(_build(str(folder / "a.parquet"), "--engine", "ray", "--workers", "0"))
    assert "--workers must be at least 1" in line


def test_a_mistake_found_on_a_worker_is_the_same_one_line(tmp_path, tiny_model_dir) -> None:
    corpus = write_corpus(tmp_path / "corpus.parquet", 20)  # row 7's text is blank
    result = _build(
        str(corpus),
        "--strict",
        "--model",
        str(tiny_model_dir),
        "--out-dir",
        str(tmp_path / "idx"),
        "--engine",
        "ray",
        "--workers",
        "1",
    )
    line = error_line(result)  # raised in a Ray task that scanned the file
    assert line.startswith("error: row 7 has a null or empty 'text' (--strict)")
    assert not (tmp_path / "idx" / ".corpus.partial").exists()


def test_bad_input_to_mine_an_index_on_ray_is_one_line(tmp_path) -> None:
    def mine(*args: str):
        return runner.invoke(app, ["-q", "mine", "--engine", "ray", *args], catch_exceptions=False)

    line = error_line(mine("--index", "nope", "--index-dir", str(tmp_path)))
    assert "nope" in line
    line = error_line(mine("--index", "docs", "--index-dir", "s3://bucket/indexes"))
    assert "is a URI, but an index folder must be a local path" in line


# the last test here: the commands join it, not start their own
@pytest.mark.usefixtures("local_ray")
def test_a_job_failing_beyond_ray_retries_is_one_line_and_resumes(
    tmp_path, tiny_model_dir, monkeypatch
) -> None:
    import ray.exceptions

    from semsearch.distributed import encode as encode_module

    corpus = write_corpus(tmp_path / "corpus.parquet", 200)
    common = [
        str(corpus),
        "--name",
        "docs",
        "--model",
        str(tiny_model_dir),
        "--out-dir",
        str(tmp_path / "idx"),
        "--index-type",
        "flat",
        "--engine",
        "ray",
        "--workers",
        "1",
    ]
    real = encode_module._encode

    def node_lost(*args, **kwargs):
        real(*args, **kwargs)  # the parts are written, then the job fails for good
        with encode_module.job_errors("encoding", resumable=True):
            raise ray.exceptions.NodeDiedError(
                "node 10.0.0.7 died and its tasks ran out of retries"
            )

    monkeypatch.setattr(encode_module, "_encode", node_lost)
    line = error_line(_build(*common))
    assert line == (
        "error: the Ray job failed while encoding (NodeDiedError: node 10.0.0.7 died and its "
        "tasks ran out of retries); the parts written so far are kept: run the same command "
        "again to resume"
    )
    parts = partial_folder(tmp_path / "idx", "docs") / "segments" / "s000000"
    (written,) = parts.glob("part-*[0-9].npy")  # 200 rows: one part
    monkeypatch.undo()
    before = written.stat().st_mtime_ns
    assert _build(*common).exit_code == 0
    assert (
        tmp_path / "idx" / "docs" / "segments" / "s000000" / written.name
    ).stat().st_mtime_ns == before
