"""`add`, `delete`, `reindex`, `compact`, `rollback`, `query --where/--at` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli.support import error_line
from living_support import generated_table, write


@pytest.fixture()
def living(cli, tmp_path):
    """An index `docs` of 40 generated rows built through the CLI, and a file of 10 more."""
    write(generated_table(40), tmp_path / "a.parquet")
    write(generated_table(10, start=40), tmp_path / "more.parquet")
    result = cli(
        "build",
        str(tmp_path / "a.parquet"),
        "--name",
        "docs",
        "--id-column",
        "doc",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
    )
    assert result.exit_code == 0, result.output
    cli.folder = tmp_path
    return cli


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.splitlines()[-1])


def test_a_day_of_changes(living) -> None:
    index_dir = ["--index-dir", living.index_dir]
    added = _json(
        living("add", str(living.folder / "more.parquet"), "--index", "docs", *index_dir, "--json")
    )
    assert (added["added"], added["generation"]) == (10, 2)
    again = _json(
        living("add", str(living.folder / "more.parquet"), "--index", "docs", *index_dir, "--json")
    )
    assert again["unchanged"] == 10 and again["generation"] is None
    (living.folder / "ids.txt").write_text("\ufeffd1\nd2\n")  # as Notepad saves it
    deleted = _json(
        living("delete", "docs", "--ids", str(living.folder / "ids.txt"), *index_dir, "--json")
    )
    assert deleted["deleted"] == 2
    assert (
        _json(living("delete", "docs", "--where", "license = 'MIT'", *index_dir, "--json"))[
            "deleted"
        ]
        == 5
    )
    hits = [
        json.loads(line)
        for line in living(
            "query", "guitar", "--index", "docs", "-k", "50", *index_dir, "--json"
        ).stdout.splitlines()
    ]
    assert len(hits) == 43 and not {"d1", "d2"} & {hit["id"] for hit in hits}
    mit = living(
        "query", "guitar", "--index", "docs", "--where", "license = 'MIT'", "--json", *index_dir
    )
    assert mit.exit_code == 0 and mit.stdout == ""
    at_one = living(
        "query", "guitar", "--index", "docs", "-k", "50", "--at", "1", "--json", *index_dir
    )
    assert len(at_one.stdout.splitlines()) == 40
    reindexed = _json(living("reindex", "docs", "--index-type", "hnsw", *index_dir, "--json"))
    assert reindexed["index"]["factory"].startswith("HNSW") and reindexed["rows"] == 43
    compacted = _json(living("compact", "docs", "--keep", "2", *index_dir, "--json"))
    assert len(compacted["segments"]) == 1
    info = _json(living("info", "docs", *index_dir, "--json"))
    assert [line["generation"] for line in info["generations"]] == [
        compacted["generation"] - 1,
        compacted["generation"],
    ]
    back = _json(living("rollback", "docs", str(compacted["generation"] - 1), *index_dir, "--json"))
    assert back["rows"] == 43 and back["operation"]["kind"] == "rollback"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["add", "{folder}/missing.parquet", "--index", "docs"], "does not exist"),
        (["add", "{folder}/more.parquet", "--index", "nope"], "no index named 'nope'"),
        (["add", "{folder}/empty.parquet", "--index", "docs"], "no rows"),
        (["add", "{folder}/dup.parquet", "--index", "docs"], "appears more than once"),
        (
            ["add", "{folder}/stamps.parquet", "--index", "docs"],
            "column 'year' holds timestamp[ms] where index 'docs' holds int64, and a date or time is not a number",
        ),
        (
            ["add", "{folder}/stamps.parquet", "--index", "docs", "--convert-types"],
            "column 'year' holds timestamp[ms]",
        ),
        (
            ["add", "{folder}/more.parquet", "--index", "docs", "--text-column", "license"],
            "has both 'license' (--text-column) and 'text'",
        ),
        # As build refuses them; before, add took them and added (0 as the default).
        (
            ["add", "{folder}/more.parquet", "--index", "docs", "--batch-size", "0"],
            "--batch-size must be at least 1, not 0",
        ),
        (
            ["add", "{folder}/more.parquet", "--index", "docs", "--batch-size", "-5"],
            "--batch-size must be at least 1, not -5",
        ),
        (["delete", "docs", "--ids", "/dev/zero"], "/dev/zero is larger than"),
        (["delete", "docs", "--where", "colour = 'red'"], "column 'colour'"),
        (["delete", "docs", "--where", "year >="], 'syntax error at or near ">=" (character 6)'),
        (["delete", "docs"], "either ids (--ids FILE) or a filter (--where EXPR)"),
        (["delete", "docs", "--ids", "{folder}/blank.txt"], "holds no text"),
        (["query", "x", "--index", "docs", "--where", "nope > 1"], "column 'nope'"),
        (["query", "x", "--index", "docs", "--at", "7"], "no generation 7"),
        (["rollback", "docs", "9"], "no generation 9"),
        (["reindex", "docs", "--index-type", "bogus"], "unknown index type"),
        (["compact", "docs", "--keep", "0"], "--keep must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_leaves_the_index_unchanged(living, args, expected) -> None:
    import pyarrow as pa

    write(
        pa.table({"doc": pa.array([], pa.string()), "text": pa.array([], pa.string())}),
        living.folder / "empty.parquet",
    )
    write(pa.concat_tables([generated_table(2, start=60)] * 2), living.folder / "dup.parquet")
    stamps = generated_table(2, start=70).drop_columns(["year"])
    write(
        stamps.append_column("year", pa.array([0, 1], pa.timestamp("s"))),
        living.folder / "stamps.parquet",
    )
    (living.folder / "blank.txt").write_text("\n \n")
    before = sorted(
        p.relative_to(living.index_dir)
        for p in Path(living.index_dir).rglob("*")
        if p.name != ".lock"
    )
    filled = [arg.format(folder=living.folder) for arg in args]
    assert expected in error_line(living(*filled, "--index-dir", living.index_dir))
    after = sorted(
        p.relative_to(living.index_dir)
        for p in Path(living.index_dir).rglob("*")
        if p.name != ".lock"
    )
    assert after == before


def test_a_second_writer_is_refused(living) -> None:
    from semsearch.store.folders import find_index

    folder = find_index("docs", Path(living.index_dir))
    with folder.writer_lock("add"):
        line = error_line(
            living("delete", "docs", "--where", "year > 2000", "--index-dir", living.index_dir)
        )
    assert "is being changed by" in line
    assert folder.manifest().generation == 1


def test_query_modes_and_reindex_lexical(cli, tmp_path) -> None:
    index_dir = ["--index", "docs", "--index-dir", cli.index_dir]
    write(generated_table(30), tmp_path / "a.parquet")
    built = cli(
        "build",
        str(tmp_path / "a.parquet"),
        "--name",
        "docs",
        "--id-column",
        "doc",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--no-lexical",
    )
    assert built.exit_code == 0, built.output
    missing = error_line(cli("query", "guitar", "--mode", "hybrid", *index_dir))
    assert "no lexical (BM25) part" in missing and "'semsearch reindex docs --lexical'" in missing
    assert "is not known: use dense, lexical, hybrid" in error_line(
        cli("query", "guitar", "--mode", "bm25", *index_dir)
    )
    assert "--index-type TYPE, --lexical" in error_line(
        cli("reindex", "docs", "--index-dir", cli.index_dir)
    )
    added = _json(cli("reindex", "docs", "--lexical", "--index-dir", cli.index_dir, "--json"))
    assert added["lexical"]["method"] == "lucene" and added["segments"][0]["lexical_dir"]
    lexical = cli("query", "guitar", "--mode", "lexical", "-k", "10", "--json", *index_dir)
    assert {json.loads(line)["id"] for line in lexical.stdout.splitlines()} == {
        "d0",
        "d3",
        "d24",
        "d27",
    }
    hybrid = cli(
        "query",
        "guitar",
        "--mode",
        "hybrid",
        "--fusion",
        "convex",
        "--alpha",
        "0.2",
        "-k",
        "3",
        *index_dir,
    )
    assert hybrid.exit_code == 0 and "guitar" in hybrid.stdout


def test_add_maps_a_renamed_text_column(living, tmp_path) -> None:
    renamed = generated_table(3, start=80).rename_columns(["doc", "body", "year", "license"])
    write(renamed, tmp_path / "renamed.parquet")
    index_dir = ["--index-dir", living.index_dir]
    added = _json(
        living(
            "add",
            str(tmp_path / "renamed.parquet"),
            "--index",
            "docs",
            "--text-column",
            "body",
            *index_dir,
            "--json",
        )
    )
    assert added["added"] == 3
    text = renamed.column("body")[0].as_py()
    top = json.loads(
        living("query", text, "--index", "docs", "-k", "1", "--json", *index_dir).stdout
    )
    assert (top["id"], top["text"]) == ("d80", text) and "body" not in top
