"""Documents are what the user counts: one corpus built with chunking on and off gives the same
ids, counts and error texts in every command, but for the chunk counts beside them; the
internal chunk columns never surface; an index written before says what it knows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import CliRunner
from server.conftest import serve

from semsearch.checksums import content_digest
from semsearch.cli.app import app
from semsearch.store.manifest import CHECKSUM_KEY, MANIFEST_FILE, generation_file

TOPICS = ["violins", "gardens", "engines", "oceans", "printers", "mountains", "rivers", "clouds"]
# Names the user never gave, which no error, count, filter list, info or hit may show.
INTERNAL = ("_semsearch", "chunk_id", "chunk_number")


def long_text(topic: str) -> str:
    return " ".join(
        f"Paragraph {n} about {topic}. It says one thing about {topic}, then another, and a "
        f"third thing that only a long text about {topic} would say."
        for n in range(6)
    )


def corpus(ids: list[str], topics: list[str], years: list[int]) -> pa.Table:
    texts = [
        long_text(t) if n % 2 == 0 else f"a short text about {t}" for n, t in enumerate(topics)
    ]
    return pa.table({"id": ids, "text": texts, "year": years})


def write_files(tmp_path: Path) -> Path:
    ids = [f"doc{n}" for n in range(8)]
    pq.write_table(corpus(ids, TOPICS, list(range(2014, 2022))), tmp_path / "corpus.parquet")
    repeated = [*ids[:5], "doc2", *ids[6:]]  # the user's rows 2 and 5 share an id
    pq.write_table(corpus(repeated, TOPICS, [2020] * 8), tmp_path / "repeated.parquet")
    more = corpus(
        ["doc1", "doc2", "doc8", "doc9"], ["lamps", "kites", "lakes", "bells"], [2020] * 4
    )
    pq.write_table(more, tmp_path / "more.parquet")
    blank = corpus(ids, TOPICS, [2020] * 8).to_pydict()
    blank["text"][3] = "   "
    pq.write_table(pa.table(blank), tmp_path / "blank.parquet")
    (tmp_path / "ids.txt").write_text("doc0\ndoc9\nnowhere\n")
    return tmp_path


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    return write_files(tmp_path)


@pytest.fixture(scope="module")
def on_and_off(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple:
    """What a user sees of the same corpus built with chunking on, and with it off."""
    files = write_files(tmp_path_factory.mktemp("corpus"))
    return lifetime(files, tiny_model_dir, "on"), lifetime(files, tiny_model_dir, "off")


def run(*args: str, ok: bool = True, stdout: bool = False) -> str:
    """The command's output; a command that should succeed and fails (or the reverse)
    gives its exit status and output instead, for the tests to show."""
    result = CliRunner().invoke(app, list(args))
    if (result.exit_code == 0) != ok:
        return f"exit {result.exit_code}: {result.output}"
    return result.stdout if stdout else result.output


def json_line(*args: str) -> dict:
    output = run(*args, "--json", stdout=True)
    return {} if output.startswith("exit") else json.loads(output.strip().splitlines()[-1])


def lifetime(files: Path, model: Path, chunking: str) -> dict:
    """What a user sees of one index, from its build to a delete by filter."""
    where = ["--index-dir", str(files / chunking)]
    seen = {}
    build = ["build", "--id-column", "id", "--model", str(model), "--chunking", chunking, *where]
    if chunking == "on":
        build += ["--chunk-tokens", "24", "--chunk-overlap", "4"]
    seen["repeated"] = run(*build, str(files / "repeated.parquet"), "--name", "r", ok=False)
    seen["strict"] = run(*build, str(files / "blank.parquet"), "--name", "s", "--strict", ok=False)
    seen["build text"] = run(
        *build, str(files / "corpus.parquet"), "--name", "c", stdout=True
    ).strip()
    seen["build"] = json_line("info", "c", *where)
    seen["add repeated"] = run(
        "add", str(files / "repeated.parquet"), "--index", "c", *where, ok=False
    )
    added = ["add", str(files / "more.parquet"), "--index", "c", *where]
    seen["add with id column"] = run(*added, "--id-column", "id", "--json")
    seen["add"] = json_line(*added) if seen["add with id column"].startswith("exit") else {}
    seen["add"] = seen["add"] or json.loads(seen["add with id column"].strip().splitlines()[-1])
    seen["add text"] = run("add", str(files / "more.parquet"), "--index", "c", *where)
    seen["delete"] = json_line("delete", "c", "--ids", str(files / "ids.txt"), *where)
    seen["delete where"] = json_line("delete", "c", "--where", "year < 2019", *where)
    seen["where error"] = run(
        "query", "x", "--index", "c", "--where", "colour = 'red'", *where, ok=False
    )
    seen["delete where error"] = run("delete", "c", "--where", "colour = 'red'", *where, ok=False)
    seen["list"] = json_line("list", *where)
    seen["info"] = json_line("info", "c", *where)
    seen["info text"] = run("info", "c", *where)
    seen["list text"] = run("list", *where)
    seen["hits"] = [
        json.loads(line)
        for line in run(
            "query", "about", "--index", "c", "-k", "20", "--json", *where, stdout=True
        ).splitlines()
    ]
    with serve(files / chunking) as client:
        seen["served"] = client.get("/indexes").json()
        seen["described"] = client.get("/indexes/c").json()
    return seen


def test_errors_name_the_users_id_column_and_rows_and_no_internal_column_shows(
    on_and_off,
) -> None:
    """Defect 1 of issue 46: `chunk_id` named in errors, `add --id-column id` refused,
    `chunk_id`/`chunk_number` in filter lists, `info` and hits."""
    on, off = on_and_off
    assert on["repeated"] == off["repeated"]
    assert "'doc2' appears more than once in 'id' (rows 2 and 5)" in on["repeated"]
    assert on["strict"] == off["strict"] and "row 3 has a null or empty 'text'" in on["strict"]
    assert on["add repeated"] == off["add repeated"]
    assert "in 'id' (rows 2 and 5)" in on["add repeated"]
    assert not on["add with id column"].startswith("exit"), on["add with id column"]
    assert on["where error"] == off["where error"]
    assert "its columns are: id, text, year" in on["where error"]
    assert on["delete where error"] == off["delete where error"]
    assert on["build"]["source"]["id_column"] == off["build"]["source"]["id_column"] == "id"
    # The same documents come back, and the filter list is the same.
    assert sorted(hit["id"] for hit in on["hits"]) == sorted(hit["id"] for hit in off["hits"])
    assert on["served"][0]["columns"] == off["served"][0]["columns"] == ["id", "text", "year"]
    assert {"chunk", "start", "end"} <= set(on["hits"][0]) and "text" in off["hits"][0]
    for seen in (on, off):
        shown = json.dumps(seen)
        assert not [name for name in INTERNAL if name in shown], [
            name for name in INTERNAL if name in shown
        ]


def test_counts_are_documents_with_chunks_beside_them_where_chunked(on_and_off) -> None:
    """Defect 2 of issue 46: chunks counted and called rows in build, add, delete, list,
    info, the server and `ChangeResult`; `source.rows_read` in chunks."""
    on, off = on_and_off
    chunks = on["build"]["chunks"]
    assert chunks > 8 and "chunks" not in off["build"]
    assert on["build text"].startswith(f"built c: 8 documents in {chunks} chunks, Flat")
    assert off["build text"].startswith("built c: 8 documents, Flat")
    assert on["build"]["rows"] == off["build"]["rows"] == 8
    assert {**on["build"]["source"], "path": ""} == {**off["build"]["source"], "path": ""}
    assert on["build"]["source"]["rows_read"] == 8
    assert {**on["add"], "chunks": None, "phases": None} == {
        **off["add"],
        "chunks": None,
        "phases": None,
    }
    assert (on["add"]["added"], on["add"]["replaced"]) == (2, 2)
    assert on["add"]["chunks"]["added"] > 2 and "chunks" not in off["add"]
    # Nothing changed: 4 documents unchanged (in so many chunks).
    assert re.sub(r"; chunks: [^(]*", " ", on["add text"]) == off["add text"]
    assert "unchanged 4" in on["add text"]
    for change in ("delete", "delete where"):
        assert {**on[change], "chunks": None} == {**off[change], "chunks": None}
    assert (on["delete"]["deleted"], on["delete"]["not_found"]) == (2, 1)
    assert on["delete where"]["deleted"] == 2  # doc3 and doc4, of 2017 and 2018
    assert on["delete"]["chunks"]["deleted"] > 2
    assert on["list"]["rows"] == off["list"]["rows"] == on["info"]["rows"] == 6
    assert on["list"]["chunks"] == on["info"]["chunks"] < chunks + on["add"]["chunks"]["added"]
    assert [line["rows"] for line in on["info"]["generations"]] == [8, 10, 8, 6]
    assert [line["rows"] for line in off["info"]["generations"]] == [8, 10, 8, 6]
    assert "6 documents in" in on["list text"] and "6 documents " in off["list text"]
    assert on["served"][0]["rows"] == off["served"][0]["rows"] == 6
    assert on["served"][0]["chunks"] == on["info"]["chunks"] and "chunks" not in off["served"][0]
    assert on["described"]["manifest"]["rows"] == 6


def test_an_index_written_before_documents_were_recorded_says_so_until_it_changes(
    files: Path, tiny_model_dir: Path
) -> None:
    """An index written before: `chunk_id` recorded as its id column, no live documents."""
    index_dir = files / "old"
    run(
        "build",
        str(files / "corpus.parquet"),
        "--name",
        "c",
        "--id-column",
        "id",
        "--model",
        str(tiny_model_dir),
        "--chunking",
        "on",
        "--index-dir",
        str(index_dir),
    )
    record = json.loads((index_dir / "c" / MANIFEST_FILE).read_text())
    chunks = record["rows"]
    record.pop(CHECKSUM_KEY)
    record.pop("documents")
    record["source"]["id_column"] = "chunk_id"
    record["source"]["rows_read"] = chunks
    record[CHECKSUM_KEY] = content_digest(record)
    text = json.dumps(record, indent=2)
    for path in (index_dir / "c" / MANIFEST_FILE, generation_file(index_dir / "c", 1)):
        path.write_text(text)
    where = ["--index-dir", str(index_dir)]
    assert f"{chunks} chunks, documents not recorded" in run("list", *where)
    assert json_line("list", *where)["rows"] is None
    assert "documents not recorded (the next add" in run("info", "c", *where)
    added = json_line(
        "add", str(files / "more.parquet"), "--index", "c", "--id-column", "id", *where
    )
    assert (added["added"], added["replaced"]) == (2, 2)
    assert json_line("info", "c", *where)["rows"] == 10
    assert "10 documents in" in run("list", *where)


def test_rows_numbered_for_want_of_ids_stay_internal(files: Path, tiny_model_dir: Path) -> None:
    """Without --id-column a chunked corpus' documents are numbered by row, in a column of
    the index's own (`document`), which, like `_semsearch_id` on another index, is the hits'
    id and never a column the user is shown."""
    where = ["--index-dir", str(files / "numbered")]
    build = ["build", str(files / "corpus.parquet"), "--name", "n", "--model", str(tiny_model_dir)]
    run(*build, "--chunking", "on", "--chunk-tokens", "24", *where)
    shown = run("info", "n", *where) + run("info", "n", "--json", *where)
    assert not re.search(r"\bdocument\b|document_column|chunk_id", shown), shown
    error = run("query", "x", "--index", "n", "--where", "colour = 1", *where, ok=False)
    assert error.rstrip().endswith("its columns are: text, id, year")
    hits = run("query", "violins", "--index", "n", "--json", "-k", "8", *where, stdout=True)
    assert sorted(json.loads(line)["id"] for line in hits.splitlines()) == list(range(8))
