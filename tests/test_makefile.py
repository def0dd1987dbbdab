"""What the Makefile installs for each of the README's commands (`make -n`: printed, not run).

`make demo` needs what semsearch runs on and the CPU encoder runtime; the test and benchmark
extras (Playwright, moto, gensim, txtai, ...) are for `make test` and the benchmarks only.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _installed(target: str, tmp_path: Path) -> list[str]:
    """What `make TARGET` would pip-install into a fresh virtual environment, in order."""
    printed = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return re.findall(r'pip install -q (?:-e )?"([^"]+)"', printed)


def _extras(requirement: str) -> set[str]:
    match = re.fullmatch(r"\.\[([a-z,-]+)\]", requirement)
    return set(match[1].split(",")) if match else set()


def test_make_demo_installs_the_runtime_alone(tmp_path) -> None:
    assert _installed("demo", tmp_path) == ["torch==2.13.0", ".[cpu-runtime]"]


def test_make_test_adds_the_test_extras_and_not_the_benchmarks(tmp_path) -> None:
    installs = _installed("test", tmp_path)
    assert installs[:2] == ["torch==2.13.0", ".[cpu-runtime]"]  # CPU torch first, as for demo
    extras = set().union(*map(_extras, installs))
    assert {"cpu-runtime", "test", "baselines"} <= extras and "bench" not in extras


def test_the_benchmarks_add_their_extra(tmp_path) -> None:
    extras = set().union(*map(_extras, _installed("bench-smoke", tmp_path)))
    assert {"cpu-runtime", "test", "baselines", "bench"} <= extras
