"""Every way into the CLI fails cleanly: one line on stderr, a non-zero exit, no traceback,
nothing left behind; --debug (or SEMSEARCH_DEBUG=1) shows the traceback instead."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line, runner

from semsearch.cli.app import app
from semsearch.models.bi_encoder import BiEncoder


@pytest.fixture()
def crashing_encoder(monkeypatch):
    """The model fails mid-build the way a bug would (not a user's mistake, not an interrupt)."""

    def encode(self, texts, **kwargs):
        raise RuntimeError("boom\nsecond line of the message")

    monkeypatch.setattr(BiEncoder, "encode", encode)


def _corpus(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("text\nalpha\nbeta\ngamma\n")
    return str(path)


@pytest.mark.torch_runtime  # the failure is injected into torch's encoding, mid-build
def test_an_unexpected_failure_is_one_line_exit_1_and_removes_the_partial_build(
    tmp_path, cli, crashing_encoder
) -> None:
    result = cli(
        "build", _corpus(tmp_path), "--model", cli.model, "--out-dir", cli.index_dir, "--json"
    )
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith(
        "error: build failed unexpectedly with RuntimeError: boom second line"
    )
    assert "--debug or SEMSEARCH_DEBUG=1" in lines[0]
    assert [path.name for path in (tmp_path / "idx").iterdir()] == []  # no hidden .c.partial


@pytest.mark.torch_runtime  # the failure is injected into BiEncoder's encoding, not the export's
@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback(tmp_path, cli, crashing_encoder, monkeypatch, how) -> None:
    args = ["build", _corpus(tmp_path), "--model", cli.model, "--out-dir", cli.index_dir, "--json"]
    if how == "flag":
        args.insert(0, "--debug")
    else:
        monkeypatch.setenv("SEMSEARCH_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        runner.invoke(app, args, catch_exceptions=False)
    # --debug lasts one command: the next one is back to one line.
    monkeypatch.delenv("SEMSEARCH_DEBUG", raising=False)
    again = cli(*args[args.index("build") :])
    assert again.exit_code == 1 and len(again.stderr.strip().splitlines()) == 1


def test_user_mistakes_about_folders_and_names_are_one_line(tmp_path, cli) -> None:
    (tmp_path / "a-file").write_text("x")
    corpus = _corpus(tmp_path)
    build = ["build", corpus, "--model", cli.model]
    assert "is a file" in error_line(cli(*build, "--out-dir", str(tmp_path / "a-file")))
    assert "cannot write the index" in error_line(
        cli(*build, "--out-dir", str(tmp_path / "a-file" / "sub"))
    )
    assert "'' is not usable" in error_line(cli(*build, "--out-dir", cli.index_dir, "--name", ""))
    assert "is not usable" in error_line(
        cli(*build, "--out-dir", cli.index_dir, "--name", "n" * 300)
    )
    assert not (tmp_path / "idx").exists()
    query = error_line(cli("query", "alpha", "--index", "n" * 300, "--index-dir", cli.index_dir))
    assert "File name too long" in query or "no index named" in query


def test_a_damaged_metadata_file_is_one_line_when_the_index_opens(tmp_path, cli) -> None:
    built = cli("build", _corpus(tmp_path), "--model", cli.model, "--out-dir", cli.index_dir)
    assert built.exit_code == 0, built.output
    (part,) = (tmp_path / "idx" / "c").rglob("part-00000.parquet")
    data = bytearray(part.read_bytes())
    data[4:-8] = bytes(len(data) - 12)  # same size, content gone
    part.write_bytes(bytes(data))
    error_line(cli("query", "alpha", "--index", "c", "--index-dir", cli.index_dir))
    part.unlink()
    error_line(cli("query", "alpha", "--index", "c", "--index-dir", cli.index_dir))


def test_a_corpus_column_named_like_semsearchs_own_is_refused_before_encoding(
    tmp_path, cli
) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "_semsearch_text_hash": [1, 2]}), path)
    line = error_line(cli("build", str(path), "--model", cli.model, "--out-dir", cli.index_dir))
    assert "'_semsearch_text_hash'" in line and "rename" in line
    assert "encoding" not in line and not (tmp_path / "idx").exists()


def test_a_json_hit_keeps_a_column_named_like_its_own_fields(tmp_path, cli) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(
        pa.table({"title": ["alpha", "beta"], "text": ["x", None], "rank": [7, 8]}), path
    )
    built = cli(
        "build",
        str(path),
        "--text-column",
        "title",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
    )
    assert built.exit_code == 0, built.output
    result = cli(
        "query", "alpha", "--index", "c", "--index-dir", cli.index_dir, "-k", "2", "--json"
    )
    hits = [json.loads(line) for line in result.stdout.splitlines()]
    assert {hit["text"] for hit in hits} == {"alpha", "beta"}
    assert [hit["rank"] for hit in hits] == [1, 2]
    assert {hit["column:text"] for hit in hits} == {"x", None}
    assert {hit["column:rank"] for hit in hits} == {7, 8}


def test_a_huge_k_returns_every_row_and_a_latin1_query_file_says_what_to_do(tmp_path, cli) -> None:
    built = cli("build", _corpus(tmp_path), "--model", cli.model, "--out-dir", cli.index_dir)
    assert built.exit_code == 0, built.output
    result = cli(
        "query", "alpha", "--index", "c", "--index-dir", cli.index_dir, "-k", str(10**12), "--json"
    )
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 3
    queries = tmp_path / "q.txt"
    queries.write_bytes("café\n".encode("latin-1"))
    line = error_line(
        cli("query", "--file", str(queries), "--index", "c", "--index-dir", cli.index_dir)
    )
    assert "not UTF-8" in line and "iconv" in line


def test_markup_in_texts_prints_as_text_in_query_and_mine_tables(tmp_path, cli) -> None:
    corpus = tmp_path / "m.csv"
    corpus.write_text("text\nhello [/] world\nhello [/] world!\nsomething else [/x]\n")
    mined = cli("mine", str(corpus), "--model", cli.model)
    assert mined.exit_code == 0 and "[/x]" in mined.stdout, mined.output
    built = cli("build", str(corpus), "--model", cli.model, "--out-dir", cli.index_dir)
    assert built.exit_code == 0, built.output
    found = cli("query", "[/]", "--index", "m", "--index-dir", cli.index_dir, "-k", "3")
    assert found.exit_code == 0 and "[/x]" in found.stdout, found.output


def test_markup_in_heatmap_sentences_prints_as_text(tmp_path, cli) -> None:
    lines = tmp_path / "s.txt"
    lines.write_text("one [/] two\n[bold]three\n")
    result = cli(
        "eval", "heatmap", str(lines), "--png", str(tmp_path / "h.png"), "--model", cli.model
    )
    assert result.exit_code == 0 and "one [/] two" in result.stdout, result.output


def test_a_closed_pipe_ends_quietly() -> None:
    import typer

    from semsearch.cli.common import user_errors

    small = typer.Typer()

    @small.command()
    @user_errors
    def emit() -> None:
        raise BrokenPipeError(32, "Broken pipe")  # what printing into `| head` raises

    result = runner.invoke(small, [], catch_exceptions=False)
    assert result.exit_code == 141 and result.stderr == ""


def test_a_5000_character_index_dir_is_one_line_for_every_command(tmp_path, cli) -> None:
    long = str(tmp_path / ("x" * 5000))
    for args in (
        ["query", "alpha"],
        ["list"],
        ["info"],
        ["verify", "c"],
        ["rollback", "c", "1"],
        ["build", _corpus(tmp_path), "--model", cli.model],
    ):
        line = error_line(cli(*args, "--index-dir", long))
        assert "File name too long" in line and "(5" in line and len(line) < 300, line
    line = error_line(
        cli(
            "build",
            str(tmp_path / ("y" * 5000) / "c.csv"),
            "--model",
            cli.model,
            "--out-dir",
            cli.index_dir,
        )
    )
    assert "is too long for this system" in line and len(line) < 300


def test_a_query_that_is_not_unicode_is_one_line(tmp_path, cli) -> None:
    assert (
        cli("build", _corpus(tmp_path), "--model", cli.model, "--out-dir", cli.index_dir).exit_code
        == 0
    )
    for text in ("\ud800", "caf\udce9"):  # a lone surrogate; bytes not UTF-8 on the command line
        line = error_line(cli("query", text, "--index", "c", "--index-dir", cli.index_dir))
        assert "query 1 is not valid text" in line and "pass UTF-8 text" in line


def test_bounds_beyond_what_the_index_uses_are_notes_on_stderr_and_in_json(tmp_path, cli) -> None:
    built = cli(
        "build",
        _corpus(tmp_path),
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--index-type",
        "hnsw",
    )
    assert built.exit_code == 0, built.output
    result = cli(
        "query",
        "alpha",
        "--index",
        "c",
        "--index-dir",
        cli.index_dir,
        "--json",
        "--ef-search",
        str(10**7),
        "-k",
        "2",
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines() == [
        "note: efSearch 10,000,000 clamped to 3 (HNSW's candidate list holds at most the "
        "largest segment's 3 rows)"
    ]
    hits = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(hits) == 2 and all(hit["notes"] == [result.stderr.strip()[6:]] for hit in hits)
