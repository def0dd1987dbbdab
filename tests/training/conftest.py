"""Tiny data files and a quick-run config for the training tests (tiny model, CPU)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest
from training.tiny_data import write_pairs_parquet, write_sick, write_stsb

from semsearch.training import DataOptions, TrainingConfig
from semsearch.training.config import GROUPS


@pytest.fixture()
def stsb_file(tmp_path: Path) -> Path:
    return write_stsb(tmp_path / "sts.tsv.gz")


@pytest.fixture()
def sick_file(tmp_path: Path) -> Path:
    return write_sick(tmp_path / "sick.tsv.gz")


@pytest.fixture()
def pairs_file(tmp_path: Path) -> Path:
    return write_pairs_parquet(tmp_path / "pairs.parquet")


@pytest.fixture()
def quick_config(
    tiny_model_dir: Path, stsb_file: Path, tmp_path: Path
) -> Callable[..., TrainingConfig]:
    """`quick_config(**changes)`: cosine on the tiny STS-B file, 2 epochs of 4 steps; `changes`
    name any option, of the config or of its groups."""

    def make(output: str = "run", data: dict | None = None, **changes) -> TrainingConfig:
        options = {"train": f"stsb:{stsb_file}", "dev": f"stsb:{stsb_file}", **(data or {})}
        settings = {
            "objective": "cosine",
            "model": str(tiny_model_dir),
            "epochs": 2,
            "batch_size": 4,
            "learning_rate": 1e-3,
            "log_every": 1,
            "device": "cpu",
            "show_progress": False,
            **changes,
        }
        groups = {name: _take(settings, group) for name, group in GROUPS.items()}
        return TrainingConfig(
            data=DataOptions(**options), output_dir=tmp_path / output, **settings, **groups
        )

    return make


def _take(settings: dict, group: type) -> object:
    """Build `group` from the settings named after its fields, removing them from `settings`."""
    return group(
        **{item.name: settings.pop(item.name) for item in fields(group) if item.name in settings}
    )
