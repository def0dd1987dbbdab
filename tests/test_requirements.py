"""The dependency floors in pyproject.toml cover what the code uses, and the installed
versions meet them: a floor below a needed API would let pip install a version that fails."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest
import torch
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# What the code needs, and why.
NEEDS = {
    "torch": ("2.5", "torch.OutOfMemoryError (models/batch_runner.py, mining/neighbours.py)"),
    # BERT took a prepared 4-D mask from 5.0 on, MPNet only from 5.9 on (create_bidirectional_mask)
    "transformers": (
        "5.9",
        "BERT and MPNet taking packing's 4-D attention mask (models/packing.py)",
    ),
}


def _floor(package: str) -> Version:
    match = re.search(rf'^\s*"{package}>=([0-9.]+)"', PYPROJECT.read_text(), re.MULTILINE)
    assert match, f"pyproject.toml has no floor for {package}"
    return Version(match.group(1))


@pytest.mark.parametrize("package", sorted(NEEDS))
def test_the_floor_covers_what_the_code_needs(package) -> None:
    needed, why = NEEDS[package]
    assert _floor(package) >= Version(needed), f"{package} >= {needed} is needed for {why}"


@pytest.mark.parametrize("package", sorted(NEEDS))
def test_the_installed_version_meets_the_floor(package) -> None:
    assert Version(version(package)) >= _floor(package)


def test_the_apis_behind_the_floors_exist() -> None:
    assert issubclass(torch.OutOfMemoryError, RuntimeError)
