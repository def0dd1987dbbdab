"""The shared option types and their NAME=VALUE parsing; commands stay short."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
