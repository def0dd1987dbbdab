"""`--engine`: a Ray option without `--engine ray`, or `--engine ray` without Ray, is one line."""

from __future__ import annotations

import sys

import pytest
from cli.support import error_line


@pytest.mark.parametrize("command", ["build", "add", "mine"])
def test_engine_ray_without_ray_says_how_to_install_it(
    cli, corpus_file, monkeypatch, command
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    extra = ["--index", "docs"] if command == "add" else []
    line = error_line(
        cli(command, str(corpus_file), *extra, "--engine", "ray", "--index-dir", cli.index_dir)
    )
    assert (
        line
        == "error: --engine ray needs Ray Data, which is not installed: pip install -e '.[ray]' in semsearch's folder"
    )


def test_unknown_engine_and_ray_options_without_it(cli, corpus_file) -> None:
    assert "unknown --engine 'spark'" in error_line(
        cli("build", str(corpus_file), "--engine", "spark")
    )
    line = error_line(cli("mine", str(corpus_file), "--workers", "2"))
    assert "--address and --workers are for --engine ray" in line
