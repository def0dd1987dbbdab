"""Fixtures shared by the command-line tests: a command runner on the tiny model.

The command-line tests run what users get: the default runtime (OpenVINO on a CPU, the
export cached once per test session), not torch as the library's own tests do. A test that
needs torch's exact vectors says so with `@pytest.mark.torch_runtime`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli.support import runner
from click.testing import Result

from semsearch.cli.app import app

CLI_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if CLI_TESTS in Path(str(item.path)).parents and not item.get_closest_marker(
            "torch_runtime"
        ):
            item.add_marker(pytest.mark.default_runtime)


@pytest.fixture()
def cli(tmp_path: Path, tiny_model_dir: Path) -> Callable[..., Result]:
    """Run `semsearch ARGS` with the tiny model (`cli.model`) and a temporary index folder
    (`cli.index_dir`); exceptions propagate, so a traceback fails the test."""

    def run(*args: str) -> Result:
        return runner.invoke(app, [*args], catch_exceptions=False)

    run.index_dir = str(tmp_path / "idx")
    run.model = str(tiny_model_dir)
    return run
