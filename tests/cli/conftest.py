"""Fixtures shared by the command-line tests: a command runner on the tiny model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli.support import runner
from click.testing import Result

from semsearch.cli.app import app


@pytest.fixture()
def cli(tmp_path: Path, tiny_model_dir: Path) -> Callable[..., Result]:
    """Run `semsearch ARGS` with the tiny model (`cli.model`) and a temporary index folder
    (`cli.index_dir`); exceptions propagate, so a traceback fails the test."""

    def run(*args: str) -> Result:
        return runner.invoke(app, [*args], catch_exceptions=False)

    run.index_dir = str(tmp_path / "idx")
    run.model = str(tiny_model_dir)
    return run
