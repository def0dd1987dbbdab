"""The shared option types and their NAME=VALUE parsing; commands stay short."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from cli.support import error_line

from semsearch.cli.options import parse_assignments, parse_options
from semsearch.errors import SemsearchError

CLI = Path(__file__).resolve().parents[2] / "semsearch" / "cli"
MOST_LINES = 60  # a function of the command line, `def` to its last line


def test_assignments_are_split_at_the_first_equals_sign() -> None:
    assert parse_assignments([" sentence1 = question ", "a=b=c"], "--column") == {
        "sentence1": "question",
        "a": "b=c",
    }
    assert parse_assignments(None, "--column") == {}


@pytest.mark.parametrize("value", ["sentence1", "=question", "sentence1=", " = "])
def test_an_assignment_without_both_sides_names_the_flag(value: str) -> None:
    with pytest.raises(SemsearchError, match=f"--column expects NAME=VALUE, got {value!r}"):
        parse_assignments([value], "--column")


def test_option_values_are_json_where_they_parse_and_text_elsewhere() -> None:
    values = ["margin=0.5", "symmetric=true", "sizes=[1, 2]", "name=cos", "mini-batch=8"]
    assert parse_options(values) == {
        "margin": 0.5,
        "symmetric": True,
        "sizes": [1, 2],
        "name": "cos",
        "mini_batch": 8,
    }


def test_every_function_of_the_command_line_fits_a_screen() -> None:
    long = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MOST_LINES:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, f"split these (options as Annotated types, steps as functions): {long}"


# --index NAME on every command that acts on an existing index.

# Each command as run on the index `docs` with --index (the argument left out), beside the
# index `other`, built after it (the most recent, which `info`, `verify`, `tune` would pick).
BY_OPTION = {
    "info": ["info", "--index", "docs", "--json"],
    "verify": ["verify", "--index", "docs", "--json"],
    "tune": ["tune", "--index", "docs", "--json"],
    "delete": ["delete", "--index", "docs", "--ids", "{ids}", "--json"],
    "reindex": ["reindex", "--index", "docs", "--no-lexical", "--json"],
    "compact": ["compact", "--index", "docs", "--json"],
    "rollback": ["rollback", "--index", "docs", "1", "--json"],
}


@pytest.fixture(scope="module")
def two_indexes(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """`docs` (generation 2: one row deleted, so that there is a generation to roll back to)
    and `other`, built after it, in one folder of indexes."""
    from cli.support import runner
    from living_support import generated_table, write

    from semsearch.cli.app import app

    folder = tmp_path_factory.mktemp("two")
    for name, start in (("docs", 0), ("other", 100)):
        corpus = write(generated_table(12, start=start), folder / f"{name}.parquet")
        built = runner.invoke(
            app,
            ["build", str(corpus), "--name", name, "--id-column", "doc", "--model"]
            + [str(tiny_model_dir), "--out-dir", str(folder / "indexes")],
        )
        assert built.exit_code == 0, built.output
    (folder / "ids.txt").write_text("d1\n")
    deleted = runner.invoke(
        app,
        ["delete", "docs", "--ids", str(folder / "ids.txt"), "--index-dir"]
        + [str(folder / "indexes")],
    )
    assert deleted.exit_code == 0, deleted.output
    return folder


@pytest.fixture()
def indexes(two_indexes: Path, tmp_path: Path) -> Path:
    """A copy of the two indexes for one test to change."""
    shutil.copytree(two_indexes / "indexes", tmp_path / "indexes")
    (tmp_path / "ids.txt").write_text("d2\n")
    return tmp_path


def _run(folder: Path, args: list[str]):
    from cli.support import runner

    from semsearch.cli.app import app

    args = [arg.replace("{ids}", str(folder / "ids.txt")) for arg in args]
    return runner.invoke(app, [*args, "--index-dir", str(folder / "indexes")])


@pytest.mark.parametrize("command", sorted(BY_OPTION))
def test_each_command_on_an_index_takes_it_as_index(command: str, indexes: Path) -> None:
    """`delete --index corpus` failed with "No such option": the commands that took the
    index as their argument now take --index too, and it names the index they act on."""
    result = _run(indexes, BY_OPTION[command])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout.splitlines()[-1])
    named = answer.get("name", answer.get("index")), Path(answer.get("path", "")).name
    assert "docs" in named, answer


@pytest.mark.parametrize("command", sorted(BY_OPTION))
def test_the_argument_and_a_different_index_are_one_error(command: str, indexes: Path) -> None:
    args = list(BY_OPTION[command])
    args[1:3] = ["docs", "--index", "other"]  # the argument, then --index naming another
    line = error_line(_run(indexes, args))
    assert line == "error: two indexes named: 'docs' (the argument) and --index 'other': give one"


@pytest.mark.parametrize("command", sorted(BY_OPTION))
def test_the_argument_and_the_same_index_are_fine(command: str, indexes: Path) -> None:
    args = list(BY_OPTION[command])
    args[1:3] = ["docs/", "--index", "docs"]
    assert _run(indexes, args).exit_code == 0


@pytest.mark.parametrize("command", ["delete", "reindex", "compact", "rollback"])
def test_a_command_that_changes_an_index_never_guesses_it(command: str, indexes: Path) -> None:
    args = [arg for arg in BY_OPTION[command] if arg not in ("--index", "docs", "1")]
    line = error_line(_run(indexes, args))
    assert line == f"error: name the index: semsearch {command} NAME, or --index NAME"


def test_rollback_takes_the_index_either_way(indexes: Path) -> None:
    before = json.loads(_run(indexes, ["rollback", "docs", "1", "--json"]).stdout)
    assert before["generation"] == 3 and before["rows"] == 12
    again = json.loads(_run(indexes, ["rollback", "2", "--index", "docs", "--json"]).stdout)
    assert again["generation"] == 4 and again["rows"] == 11
    for args in (["--index", "docs"], ["docs"]):
        assert error_line(_run(indexes, ["rollback", *args])) == (
            "error: say which generation: semsearch rollback NAME GENERATION"
        )


def test_serve_takes_its_indexes_as_index_too(indexes: Path) -> None:
    """Refused before the server starts: a list that disagrees, and an index not there."""
    line = error_line(_run(indexes, ["serve", "docs", "--index", "other"]))
    assert line == "error: two lists of indexes: docs (the arguments) and --index other: give one"
    named = error_line(_run(indexes, ["serve", "--index", "nope"]))
    assert named == error_line(_run(indexes, ["serve", "nope"]))


def test_every_command_with_an_index_dir_takes_index(indexes: Path) -> None:
    """Whatever reads an index folder names the index with --index; `build` writes one (its
    name is --name) and `list` lists them."""
    import typer.main

    from semsearch.cli.app import app

    def commands(group, prefix=()):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, (*prefix, name))
            else:
                yield (" ".join((*prefix, name)), command)

    lacking = [
        name
        for name, command in commands(typer.main.get_command(app))
        if any("--index-dir" in param.opts for param in command.params)
        and name not in ("build", "list")
        and not any("--index" in param.opts for param in command.params)
    ]
    assert not lacking


def test_build_names_its_index_with_name_and_no_longer_takes_index(indexes: Path) -> None:
    """--index was build's hidden old spelling of --index-type: it named a type, not an index."""
    result = _run(indexes, ["build", str(indexes / "ids.txt"), "--index", "flat"])
    assert result.exit_code == 2 and "No such option: --index" in result.output
