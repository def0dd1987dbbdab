"""Plain options converted without pydantic give typer's values and typer's errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer._click import Context
from typer._coercion import build_runtime_param

from semsearch.cli.app import app
from semsearch.cli.plain_params import PlainConversion, plain_conversion

SAMPLES = {
    "str": ["abc", "", " spaced ", "-k", "ünïcode", b"bytes", 3],
    "int": ["5", "-3", "0", "007", " 5", "+5", "5.0", "1_000", "abc", "9" * 30, 5, True, 2.0],
    "float": ["0.5", "1", "-2.25", "1e3", ".5", "nan", "inf", "abc", 0.5, 1, True],
    "bool": [True, False, "true", "1", "no", ""],
    "Path": ["some/where", "", ".", "a\0b", Path("x"), 3],
    "list[str]": [("a", "b"), [], ("a",), "a", ("a", 1)],
}


def _parameters() -> list:
    """Every parameter of every command, with its command."""
    found = []

    def walk(command) -> None:
        found.extend((command, param) for param in command.params)
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return found


def _kind(param) -> str:
    annotation = param.type_descriptor.annotation
    return (
        getattr(annotation, "__name__", None) if isinstance(annotation, type) else str(annotation)
    )


def _outcome(conversion, value, param, ctx):
    try:
        converted = conversion.coerce(value, param=param, ctx=ctx)
    except Exception as exc:
        return ("raises", type(exc).__name__, str(exc))
    return ("gives", type(converted).__name__, repr(converted))


def test_every_option_of_every_command_is_plain() -> None:
    """Else that command still imports pydantic (0.14 s) to parse its options."""
    parameters = _parameters()
    assert len(parameters) > 200
    assert [param.name for _, param in parameters if plain_conversion(param) is None] == []


def test_plain_conversions_give_what_typer_gives(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "some").mkdir()
    checked = set()
    for command, param in _parameters():
        kind = _kind(param)
        key = (kind, param.multiple, param.nargs)
        if key in checked:
            continue
        checked.add(key)
        ctx = Context(command)
        for value in [None, *SAMPLES[kind]]:
            param._runtime_param = None
            theirs = _outcome(build_runtime_param(param.type_descriptor), value, param, ctx)
            ours = plain_conversion(param)
            assert isinstance(ours, PlainConversion)
            assert _outcome(ours, value, param, ctx) == theirs, (kind, value)
    assert {kind for kind, _, _ in checked} == set(SAMPLES)


def test_a_value_typer_refuses_gets_typers_message(cli) -> None:
    result = cli("query", "x", "--index-dir", cli.index_dir, "-k", "many")
    assert result.exit_code == 2 and "valid integer" in result.output


def test_the_command_line_imports_no_pydantic() -> None:
    script = (
        "import sys\n"
        "from semsearch.cli.app import app\n"
        "try:\n"
        "    app(['query', 'x', '--index', 'nope', '--index-dir', 'nowhere', '-k', '3'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('\\nPYDANTIC=' + str('pydantic' in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == "PYDANTIC=False", done.stdout + done.stderr


@pytest.mark.parametrize("annotation", ["constrained int", "existing path"])
def test_an_option_with_typer_constraints_is_left_to_typer(annotation) -> None:
    command = typer.main.get_command(app).commands["query"]
    param = next(
        p for p in command.params if p.name == ("k" if "int" in annotation else "index_dir")
    )
    info = param.type_descriptor.parameter_info
    field, value = ("min", 1) if "int" in annotation else ("exists", True)
    original = getattr(info, field)
    param._runtime_param = None
    try:
        setattr(info, field, value)
        assert plain_conversion(param) is None
    finally:
        setattr(info, field, original)
