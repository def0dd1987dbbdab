"""`semsearch build --vector-column` and `semsearch query --vectors FILE.npy` end to end."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line

DIMENSION = 16


@pytest.fixture()
def base() -> np.ndarray:
    return np.random.default_rng(3).normal(size=(30, DIMENSION)).astype(np.float32)


@pytest.fixture()
def own(cli, tmp_path, base):
    """An index built from a vector column with no model named."""
    path = tmp_path / "own.parquet"
    pq.write_table(
        pa.table(
            {
                "emb": pa.array(list(base), pa.list_(pa.float32())),
                "tag": [f"t{i}" for i in range(len(base))],
            }
        ),
        path,
    )
    result = cli(
        "build",
        str(path),
        "--vector-column",
        "emb",
        "--out-dir",
        cli.index_dir,
        "--index-type",
        "flat",
    )
    assert result.exit_code == 0, result.output
    assert "built own: 30 documents" in result.stdout
    return cli


def test_query_vectors_prints_json_lines_with_the_query_row_and_rank(own, tmp_path, base) -> None:
    queries = base[[7, 19]] + 0.01
    np.save(tmp_path / "q.npy", queries)
    result = own(
        "query",
        "--vectors",
        str(tmp_path / "q.npy"),
        "--index-dir",
        own.index_dir,
        "-k",
        "3",
        "--json",
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["query_row"], r["rank"]) for r in records] == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 1),
        (1, 2),
        (1, 3),
    ]
    assert (records[0]["id"], records[0]["tag"]) == (7, "t7")
    assert records[3]["id"] == 19
    assert "text" not in records[0]  # no text column: no empty text field either


def test_a_build_of_your_own_vectors_says_it_read_them(cli, tmp_path) -> None:
    """With --model (for text queries) the model is loaded, but it encodes nothing: the build
    line and the manifest say the vectors were read, not which runtime would have encoded."""
    vectors = np.random.default_rng(4).normal(size=(12, 32)).astype(np.float32)  # tiny: 32-d
    path = tmp_path / "own.parquet"
    pq.write_table(pa.table({"emb": pa.array(list(vectors), pa.list_(pa.float32()))}), path)
    result = cli(
        "build",
        str(path),
        "--vector-column",
        "emb",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
    )
    assert result.exit_code == 0, result.output
    assert "(vectors read from column 'emb', none encoded)" in result.stdout
    assert "encoder on" not in result.stdout
    manifest = json.loads((tmp_path / "idx" / "own" / "manifest.json").read_text())
    assert manifest["operation"]["runtime"] is None
    table = cli(
        "query", "--vectors", str(_saved(tmp_path, vectors[:1])), "--index-dir", cli.index_dir
    )
    assert table.exit_code == 0, table.output
    assert "text" not in table.stdout and "vector 0" in table.stdout


def _saved(tmp_path, array: np.ndarray):
    np.save(tmp_path / "q.npy", array)
    return tmp_path / "q.npy"


def test_query_vectors_as_a_table(own, tmp_path, base) -> None:
    np.save(tmp_path / "q.npy", base[:1])
    result = own(
        "query", "--vectors", str(tmp_path / "q.npy"), "--index-dir", own.index_dir, "--show", "tag"
    )
    assert result.exit_code == 0, result.output
    assert "vector 0" in result.stdout and "t0" in result.stdout


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.ones(DIMENSION, np.float32), r"holds a float32 array of shape \(16,\)"),
        (np.ones((2, DIMENSION), np.int64), r"holds a int64 array"),
        (np.ones((2, 2, DIMENSION), np.float32), r"2-D float array"),
        (np.ones((2, DIMENSION + 1), np.float32), r"are 17-d; the index holds 16-d"),
        (np.full((1, DIMENSION), np.nan, np.float32), r"NaN or infinite values"),
    ],
)
def test_a_bad_npy_is_one_line(own, tmp_path, array, message) -> None:
    np.save(tmp_path / "q.npy", array)
    result = own("query", "--vectors", str(tmp_path / "q.npy"), "--index-dir", own.index_dir)
    assert re.search(message, error_line(result))


def test_a_file_that_is_not_npy_is_one_line(own, tmp_path) -> None:
    (tmp_path / "q.npy").write_text("not numpy")
    result = own("query", "--vectors", str(tmp_path / "q.npy"), "--index-dir", own.index_dir)
    assert "is not a readable .npy file" in error_line(result)


def test_an_empty_npy_file_is_one_line(own, tmp_path) -> None:
    (tmp_path / "q.npy").write_bytes(b"")
    result = own("query", "--vectors", str(tmp_path / "q.npy"), "--index-dir", own.index_dir)
    assert error_line(result).endswith(
        "q.npy is empty: give a .npy file of query vectors (np.save(path, vectors))"
    )


def test_a_text_query_on_your_own_vectors_without_a_model_is_one_line(own) -> None:
    result = own("query", "a guitar", "--index-dir", own.index_dir)
    assert error_line(result) == (
        "error: index 'own' holds your own vectors and names no model: query with "
        "--vectors FILE.npy, or rebuild with --model NAME"
    )


def test_a_build_from_a_column_of_text_is_one_line(cli, tmp_path) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"emb": ["0.1, 0.2", "0.3, 0.4"]}), path)
    result = cli("build", str(path), "--vector-column", "emb", "--out-dir", cli.index_dir)
    assert "holds string, not lists of numbers" in error_line(result)


def test_query_oversample_reaches_the_exact_neighbours_of_a_disk_index(cli, tmp_path) -> None:
    """`--nprobe` and `--oversample` override a disk index's manifest for this query: at the
    most lists and candidates its top-k is the exact one, at one of each it is not."""
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(40, 32))
    base = (centres[rng.integers(0, 40, 2000)] + 0.5 * rng.normal(size=(2000, 32))).astype(
        np.float32
    )
    path = tmp_path / "many.parquet"
    pq.write_table(pa.table({"emb": pa.array(list(base), pa.list_(pa.float32()))}), path)
    built = cli(
        "build",
        str(path),
        "--vector-column",
        "emb",
        "--out-dir",
        cli.index_dir,
        "--index-type",
        "disk",
        "--target-recall",
        "0",
    )
    assert built.exit_code == 0, built.output
    queries = rng.normal(size=(8, 32)).astype(np.float32)
    np.save(tmp_path / "q.npy", queries)
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    exact = np.argsort(-(queries @ unit.T), axis=1)[:, :10]

    def found(*options: str) -> np.ndarray:
        result = cli(
            "query",
            "--vectors",
            str(tmp_path / "q.npy"),
            "--index-dir",
            cli.index_dir,
            "--json",
            *options,
        )
        assert result.exit_code == 0, result.output
        records = [json.loads(line) for line in result.stdout.splitlines()]
        return np.array([r["id"] for r in records]).reshape(8, 10)

    wide = found("--nprobe", "4096", "--oversample", "256")
    assert all(set(w) == set(e) for w, e in zip(wide, exact))
    narrow = found("--nprobe", "1", "--oversample", "1")
    assert not all(set(n) == set(e) for n, e in zip(narrow, exact))


def test_verbose_leaves_out_faiss_s_tries_at_its_faster_builds(own, tmp_path, base) -> None:
    """FAISS tries its AVX512 and AVX2 builds before the one it loads and logs each one
    missing as "Could not load library": no failure, so `-v` does not show it."""
    np.save(tmp_path / "q.npy", base[:1])
    assert own("-v", "list", "--index-dir", own.index_dir).exit_code == 0
    assert logging.getLogger("faiss.loader").getEffectiveLevel() == logging.WARNING
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "semsearch",
            "-v",
            "query",
            "--vectors",
            str(tmp_path / "q.npy"),
            "--index-dir",
            own.index_dir,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr
    assert len(process.stdout.splitlines()) == 10
    assert "Could not load library" not in process.stderr
    assert "Loading faiss" not in process.stderr


def test_k_beyond_the_rows_says_so_on_stderr_and_in_json(own, tmp_path, base) -> None:
    np.save(tmp_path / "q.npy", base[:1])
    result = own(
        "query",
        "--vectors",
        str(tmp_path / "q.npy"),
        "--index",
        "own",
        "--index-dir",
        own.index_dir,
        "-k",
        "20000",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == ["note: k 20,000 clamped to 30 (the index holds 30 rows)"]
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 30
    assert records[0]["notes"] == ["k 20,000 clamped to 30 (the index holds 30 rows)"]


def test_a_table_into_a_pipe_keeps_each_row_on_one_line(cli, tmp_path, base) -> None:
    """Into a pipe or a file rich assumed 80 columns and folded the cells of a wider table
    over several lines, which a script reads one at a time; a text's own line breaks too."""
    path = tmp_path / "wide.parquet"
    notes = [f"note {i}:\n" + "word " * 20 for i in range(len(base))]
    pq.write_table(
        pa.table({"emb": pa.array(list(base), pa.list_(pa.float32())), "note": notes}), path
    )
    assert (
        cli("build", str(path), "--vector-column", "emb", "--out-dir", cli.index_dir).exit_code == 0
    )
    np.save(tmp_path / "q.npy", base[:2])
    result = cli(
        "query",
        "--vectors",
        str(tmp_path / "q.npy"),
        "--index-dir",
        cli.index_dir,
        "-k",
        "3",
        "--show",
        "note",
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 6 and all(len(row) > 80 for row in rows)
    for row in rows:
        number = row.split("│")[3].strip()
        assert f"note {number}: word word word" in row


def test_a_query_that_finds_nothing_says_so(own, tmp_path, base) -> None:
    np.save(tmp_path / "q.npy", base[:2])
    query = [
        "query",
        "--vectors",
        str(tmp_path / "q.npy"),
        "--index",
        "own",
        "--index-dir",
        own.index_dir,
        "--where",
        "tag = 'none'",
    ]
    table = own(*query)
    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines() == ["vector 0", "no results", "vector 1", "no results"]
    lines = own(*query, "--json")
    assert lines.exit_code == 0, lines.output
    assert lines.stdout == ""  # JSON lines: no record
    assert lines.stderr.splitlines() == ['no results for "vector 0"', 'no results for "vector 1"']


def test_a_text_query_that_finds_nothing_says_so(cli, corpus_file) -> None:
    built = cli(
        "build",
        str(corpus_file),
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
    )
    assert built.exit_code == 0, built.output
    query = ["query", "cats", "--index-dir", cli.index_dir, "--where", "topic = 'none'"]
    assert cli(*query).stdout.splitlines()[-2:] == ["cats", "no results"]
    lines = cli(*query, "--json")
    assert lines.exit_code == 0 and lines.stdout == ""
    assert lines.stderr.splitlines()[-1] == 'no results for "cats"'


def test_the_index_that_answered_is_named(own, tmp_path, base) -> None:
    """Without --index the most recent index answers: one line on stderr names it (not
    under -q); every JSON hit names it, --index or not."""
    np.save(tmp_path / "q.npy", base[:1])
    query = ["query", "--vectors", str(tmp_path / "q.npy"), "--index-dir", own.index_dir, "-k", "2"]
    result = own(*query, "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"index: own (the most recent in {own.index_dir}/; choose one with --index)"
    ]
    assert [json.loads(line)["index"] for line in result.stdout.splitlines()] == ["own", "own"]
    table = own(*query)
    assert table.exit_code == 0 and table.stderr.startswith("index: own ")
    chosen = own(*query, "--index", "own", "--json")
    assert chosen.stderr == "" and json.loads(chosen.stdout.splitlines()[0])["index"] == "own"
    assert own("-q", *query).stderr == ""


def test_a_column_called_index_keeps_its_value(cli, tmp_path, base) -> None:
    path = tmp_path / "own.parquet"
    pq.write_table(
        pa.table(
            {
                "emb": pa.array(list(base), pa.list_(pa.float32())),
                "index": [f"i{i}" for i in range(len(base))],
            }
        ),
        path,
    )
    assert (
        cli("build", str(path), "--vector-column", "emb", "--out-dir", cli.index_dir).exit_code == 0
    )
    np.save(tmp_path / "q.npy", base[3:4])
    result = cli(
        "query",
        "--vectors",
        str(tmp_path / "q.npy"),
        "--index-dir",
        cli.index_dir,
        "-k",
        "1",
        "--json",
    )
    [record] = [json.loads(line) for line in result.stdout.splitlines()]
    assert (record["index"], record["column:index"]) == ("own", "i3")


def test_a_bad_where_is_one_line_about_what_the_user_typed(own, tmp_path, base) -> None:
    np.save(tmp_path / "q.npy", base[:1])
    query = ["query", "--vectors", str(tmp_path / "q.npy"), "--index-dir", own.index_dir]
    assert error_line(own(*query, "--where", "month >= 2024")) == (
        "error: --where names the column 'month', which the index's metadata does not have; "
        "its columns are: tag"
    )
    assert error_line(own(*query, "--where", "tag = 't1' AND")) == (
        'error: --where "tag = \'t1\' AND": syntax error at or near "AND" (character 12): '
        "check the expression"
    )


def test_query_vectors_explain_as_the_last_json_line(own, tmp_path, base) -> None:
    np.save(tmp_path / "q.npy", base[[4]])
    args = ["query", "--vectors", str(tmp_path / "q.npy"), "--index-dir", own.index_dir]
    result = own(*args, "-k", "3", "--json", "--explain", "--where", "tag != 't1'")
    assert result.exit_code == 0, result.output
    *hits, last = [json.loads(line) for line in result.stdout.splitlines()]
    assert [hit["rank"] for hit in hits] == [1, 2, 3] and hits[0]["tag"] == "t4"
    plan = last["explain"]
    assert plan["queries"] == 1 and plan["index"]["structure"] == "Flat"
    assert plan["filter"]["matches"] == 29 and plan["filter"]["strategy"].startswith("exact")
    assert set(plan["time"]["phases"]) == {"filter", "vector search", "metadata"}
