"""The command line end to end: output formats, and one clear line for every bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from cli.support import error_line, runner

from semsearch.cli.app import app


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
    return cli


def test_build_then_query_as_json(built, sentences) -> None:
    result = built("query", sentences[2], "--index-dir", built.index_dir, "-k", "3", "--json")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["rank"] for r in records] == [1, 2, 3]
    assert records[0]["id"] == "d2" and records[0]["topic"] == "pets"


def test_query_file_runs_every_query(built, tmp_path, sentences) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text("\n".join(sentences[:4]) + "\n\n")
    result = built(
        "query", "--file", str(queries), "--index-dir", built.index_dir, "-k", "1", "--json"
    )
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in records] == ["d0", "d1", "d2", "d3"]


def test_table_output_shows_ids_and_scores(built) -> None:
    result = built("query", "guitar", "--index", "docs", "--index-dir", built.index_dir, "-k", "2")
    assert result.exit_code == 0 and "rank" in result.stdout and "score" in result.stdout


def test_info_and_list(built) -> None:
    info = json.loads(built("info", "docs", "--index-dir", built.index_dir, "--json").stdout)
    assert info["rows"] == 12 and info["generation"] == 1 and info["bytes"] > 0
    assert [line["generation"] for line in info["generations"]] == [1]
    assert info["segments"][0]["rows"] == 12 and info["segments"][0]["index_file_bytes"] > 0
    listing = [
        json.loads(line)
        for line in built("list", "--index-dir", built.index_dir, "--json").stdout.splitlines()
    ]
    assert [row["name"] for row in listing] == ["docs"]


def test_existing_index_name(built, corpus_file) -> None:
    result = built(
        "build",
        str(corpus_file),
        "--name",
        "docs",
        "--model",
        built.model,
        "--out-dir",
        built.index_dir,
    )
    assert "--overwrite" in error_line(result)


@pytest.mark.parametrize(
    "args,expected",
    [
        (["build", "missing.parquet"], "does not exist"),
        (["build", "{corpus}", "--text-column", "body"], "columns are: doc_id, text, topic"),
        (["build", "{corpus}", "--index-type", "annoy"], "unknown index type"),
        (["query", "x", "--index", "nope"], "no index named 'nope'"),
        (["query"], "give either a query"),
    ],
)
def test_bad_input_is_one_line(cli, corpus_file, args, expected) -> None:
    args = [a.replace("{corpus}", str(corpus_file)) for a in args]
    if args[0] == "build":
        args += ["--model", cli.model, "--out-dir", cli.index_dir]
    else:
        args += ["--index-dir", cli.index_dir]
    assert expected in error_line(cli(*args))


def test_not_a_parquet_file(cli, tmp_path) -> None:
    fake = tmp_path / "fake.parquet"
    fake.write_text("this is plain text")
    result = cli("build", str(fake), "--model", cli.model, "--out-dir", cli.index_dir)
    assert "not a readable parquet" in error_line(result)


def test_corrupt_index_from_the_console_script(built) -> None:
    index_file = f"{built.index_dir}/docs/segments/s000000/index-g000001.faiss"
    with open(index_file, "r+b") as handle:
        handle.truncate(100)
    process = subprocess.run(
        [sys.executable, "-m", "semsearch", "query", "guitar", "--index-dir", built.index_dir],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 2
    assert process.stderr.strip().startswith("error: ") and "truncated" in process.stderr
    assert "Traceback" not in process.stderr and len(process.stderr.strip().splitlines()) == 1


def test_help_explains_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    for command in ("build", "query", "info", "list"):
        assert command in result.stdout


@pytest.mark.parametrize("command", ["build", "reindex"])
def test_index_type_help_names_every_named_type(command) -> None:
    from typer.main import get_command

    from semsearch.ann.factory import NAMED_TYPES

    [option] = [p for p in get_command(app).commands[command].params if p.name == "index_type"]
    assert set(NAMED_TYPES) <= set(re.findall(r"[a-z]+", option.help))


def test_quiet_build_prints_no_progress(cli, corpus_file) -> None:
    result = cli(
        "-q",
        "build",
        str(corpus_file),
        "--name",
        "quiet",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
    )
    assert result.exit_code == 0 and result.stderr == "" and "built quiet" in result.stdout


@pytest.mark.parametrize(
    ("command", "passive"), [("query", True), ("serve", True), ("build", False)]
)
def test_query_commands_let_idle_openmp_threads_sleep(command, passive) -> None:
    """Set before FAISS loads, so a fresh interpreter is the only honest place to look."""
    probe = (
        "import os, sys; from semsearch.cli import app; sys.argv = ['semsearch', "
        f"'{command}', '--help']\napp.leave = sys.exit\ntry:\n    app.main()\n"
        "except SystemExit:\n    pass\n"
        "print('POLICY=' + os.environ.get('OMP_WAIT_POLICY', ''), file=sys.stderr)"
    )
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    process = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env
    )
    assert f"POLICY={'PASSIVE' if passive else ''}" in process.stderr.splitlines()[-1]


def test_query_explain_prints_the_plan_and_each_stage_s_time(built, sentences) -> None:
    args = ["query", sentences[2], "--index-dir", built.index_dir, "-k", "2", "--explain"]
    table = built(*args, "--where", "topic = 'pets'")
    assert table.exit_code == 0, table.output
    block = table.stdout[table.stdout.index("plan: dense search, k 2, 1 query") :].splitlines()
    assert block[1] == "parameters: none (exact search)"
    assert block[2].startswith("filter: topic = 'pets' keeps 2 of 12 rows (16.7 %): exact")
    assert block[-1].startswith("time: encode ") and " ms; total " in block[-1]
    # Under --json, one more line after the hits: {"explain": {...}}, in every mode.
    for mode in ("dense", "lexical", "hybrid"):
        result = built(*args, "--json", "--mode", mode)
        *hits, last = [json.loads(line) for line in result.stdout.splitlines()]
        assert hits and all("rank" in hit for hit in hits)  # BM25 may find one
        assert last["explain"]["mode"] == mode and last["explain"]["k"] == 2
        assert ("encode" in last["explain"]["time"]["phases"]) == (mode != "lexical")


def test_a_query_from_the_console_script_prints_all_it_found(built) -> None:
    """A query leaves by `leave` (no interpreter teardown): nothing it printed is lost."""
    args = ["query", "guitar", "--index-dir", built.index_dir, "-k", "12", "--json"]
    process = subprocess.run(
        [sys.executable, "-m", "semsearch", *args], capture_output=True, text=True, timeout=120
    )
    assert process.returncode == 0, process.stderr
    lines = process.stdout.splitlines()
    assert len(lines) == 12 and lines == built(*args).stdout.splitlines()


def test_leave_flushes_the_output_keeps_the_status_and_waits_for_no_idle_thread() -> None:
    """An idle pool worker (a non-daemon thread that only Python's own exit wakes) hung a
    query that had loaded torch, when `leave` joined every thread."""
    script = (
        "import sys\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from semsearch.cli.app import leave\n"
        "ThreadPoolExecutor(2).submit(print, 'ran', file=sys.stderr).result()\n"
        "sys.stdout.write('x' * 100000)\n"
        "leave(sys.argv[1] if sys.argv[1] != 'int' else 3)\n"
    )
    said = subprocess.run(
        [sys.executable, "-c", script, "bye"], capture_output=True, text=True, timeout=60
    )
    assert (said.returncode, said.stderr.split(), len(said.stdout)) == (1, ["ran", "bye"], 100000)
    status = subprocess.run([sys.executable, "-c", script, "int"], capture_output=True, timeout=60)
    assert status.returncode == 3
