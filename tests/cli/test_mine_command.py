"""`semsearch mine` end to end: table, JSON lines, Parquet files, and one line per bad input."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line


@pytest.fixture()
def copies_file(tmp_path, sentences):
    """The shared sentences with one of them copied three times."""
    texts = [*sentences, sentences[0], sentences[0], sentences[0]]
    path = tmp_path / "copies.parquet"
    pq.write_table(pa.table({"doc_id": [f"d{i}" for i in range(len(texts))], "text": texts}), path)
    return path


def test_table_shows_ranked_pairs(cli, corpus_file) -> None:
    result = cli(
        "mine",
        str(corpus_file),
        "--id-column",
        "doc_id",
        "--model",
        cli.model,
        "--device",
        "cpu",
        "--show",
        "3",
    )
    assert result.exit_code == 0, result.output
    for column in ("rank", "score", "id_a", "id_b", "text_a", "text_b"):
        assert column in result.stdout
    assert "pairs (of" in result.stdout


def test_json_lines_are_sorted_pairs(cli, corpus_file) -> None:
    result = cli(
        "mine",
        str(corpus_file),
        "--model",
        cli.model,
        "--device",
        "cpu",
        "-k",
        "2",
        "--top",
        "5",
        "--json",
    )
    *records, timed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [record["rank"] for record in records] == [1, 2, 3, 4, 5]
    # Then where the time went: every phase of a corpus's mining, which make the wall time.
    assert timed["kind"] == "phases"
    named = {"read", "duplicates", "load model", "encode", "index", "search", "pairs", "write"}
    assert set(timed["phases"]) == named
    total = sum(timed["phases"].values()) - timed["overlapped_s"] + timed["other_s"]
    assert total == pytest.approx(timed["wall_s"], abs=0.005)
    assert timed["other_s"] <= 0.1 * timed["wall_s"]
    assert all(record["kind"] == "pair" and record["id_a"] < record["id_b"] for record in records)
    scores = [record["score"] for record in records]
    assert scores == sorted(scores, reverse=True)


def test_separate_writes_pairs_and_groups(cli, copies_file, tmp_path) -> None:
    out = tmp_path / "results" / "pairs.parquet"
    result = cli(
        "mine",
        str(copies_file),
        "--id-column",
        "doc_id",
        "--model",
        cli.model,
        "--device",
        "cpu",
        "--exact-duplicates",
        "separate",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    pairs = pq.read_table(out)
    assert pairs.column_names == ["id_a", "id_b", "text_a", "text_b", "score"]
    assert not {"d12", "d13", "d14"} & set(
        pairs.column("id_a").to_pylist() + pairs.column("id_b").to_pylist()
    )
    groups = pq.read_table(tmp_path / "results" / "pairs.duplicates.parquet").to_pylist()
    assert groups == [
        {"text": "A man is playing a guitar.", "count": 4, "ids": ["d0", "d12", "d13", "d14"]}
    ]
    assert "largest groups of identical texts" in result.stdout


def test_index_gives_the_same_pairs_as_its_corpus(cli, corpus_file) -> None:
    built = cli(
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
    assert built.exit_code == 0, built.output
    from_file = cli(
        "mine",
        str(corpus_file),
        "--id-column",
        "doc_id",
        "--model",
        cli.model,
        "--device",
        "cpu",
        "-k",
        "3",
        "--json",
    )
    from_index = cli("mine", "--index", "docs", "--index-dir", cli.index_dir, "-k", "3", "--json")
    pairs = [
        [(r["id_a"], r["id_b"]) for r in map(json.loads, result.stdout.splitlines()) if "id_a" in r]
        for result in (from_file, from_index)
    ]
    assert pairs[0] == pairs[1] and len(pairs[0]) > 12


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["{corpus}", "--threshold", "1.5"], "outside [-1, 1]"),
        (["{corpus}", "--threshold", "-2"], "outside [-1, 1]"),
        (["{single}"], "mining needs at least two"),
        (["--index", "nope"], "no index named 'nope'"),
        (["missing.parquet"], "does not exist"),
        ([], "give either a corpus file"),
        (["{corpus}", "--index", "docs"], "give either a corpus file"),
        (["--index", "docs", "--text-column", "body"], "fixed by the index's manifest"),
        (["{corpus}", "--exact-duplicates", "merge"], "choose keep, separate, drop"),
        (["{corpus}", "--duplicates-out", "d.parquet"], "needs --exact-duplicates separate"),
        (["{corpus}", "--text-column", "body"], "columns are: doc_id, text, topic"),
        (["{corpus}", "--work-dir", "w"], "--work-dir is for mining a corpus file with --engine"),
    ],
)
def test_bad_input_is_one_line(cli, corpus_file, tmp_path, args, expected) -> None:
    single = tmp_path / "single.csv"
    single.write_text("text\nonly one\n\n", encoding="utf-8")
    args = [a.replace("{corpus}", str(corpus_file)).replace("{single}", str(single)) for a in args]
    result = cli("mine", *args, "--index-dir", cli.index_dir, "--device", "cpu")
    assert expected in error_line(result)
