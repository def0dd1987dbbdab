"""The training config: checked at construction, compared when resuming."""

from __future__ import annotations

import pytest

from semsearch.errors import SemsearchError
from semsearch.training import DataOptions, OptimizationOptions, RunOptions, TrainingConfig


def test_unknown_objective_and_choices_fail_with_the_list(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="unknown objective 'cosin': choose one of softmax"):
        TrainingConfig("cosin", DataOptions("x.csv"), tmp_path)
    with pytest.raises(SemsearchError, match="unknown form 'pairs'"):
        TrainingConfig("mnr", DataOptions("x.csv", form="pairs"), tmp_path)  # type: ignore[arg-type]
    with pytest.raises(SemsearchError, match="batch_size must be at least 1"):
        TrainingConfig("mnr", DataOptions("x.csv"), tmp_path, OptimizationOptions(batch_size=0))


def test_round_trip_and_resume_differences(tmp_path) -> None:
    config = TrainingConfig(
        "online_contrastive",
        DataOptions("x.csv", columns={"label": "y"}),
        tmp_path,
        objective_options={"parts": ("u", "v")},
    )
    assert config.objective == "online-contrastive"
    saved = TrainingConfig.from_dict(config.to_dict()).to_dict()
    assert config.resume_differences(saved) == []
    moved = TrainingConfig(
        "online-contrastive",
        DataOptions("x.csv", columns={"label": "y"}, test="t.csv"),
        tmp_path / "elsewhere",
        objective_options={"parts": ["u", "v"]},
        run=RunOptions(eval_every=5),
    )
    assert (
        moved.resume_differences(saved) == []
    )  # where and how often to look change nothing learnt
    changed = TrainingConfig(
        "online-contrastive",
        DataOptions("y.csv"),
        tmp_path,
        optimization=OptimizationOptions(seed=1),
    )
    assert changed.resume_differences(saved) == [
        "data.columns",
        "data.train",
        "objective_options",
        "seed",
    ]


# A config as checkpoints and training.json held it before the options were grouped.
FLAT_CONFIG = {
    "objective": "cosine",
    "output_dir": "m",
    "model": "default",
    "objective_options": {},
    "data": {
        "train": "x.csv",
        "dev": None,
        "test": None,
        "columns": {},
        "form": "none",
        "positive_at": 0.8,
        "score_max": None,
        "dev_task": "auto",
    },
    "pooling": None,
    "normalize": None,
    "epochs": 3,
    "batch_size": 16,
    "learning_rate": 2e-5,
    "warmup_fraction": 0.1,
    "weight_decay": 0.01,
    "max_grad_norm": 1.0,
    "seed": 0,
    "max_steps": None,
    "eval_every": 0,
    "log_every": 10,
    "checkpoint_every": 200,
    "precision": "auto",
    "device": "cpu",
    "show_progress": True,
}


def test_the_saved_form_stays_flat_so_earlier_checkpoints_resume(tmp_path) -> None:
    config = TrainingConfig(
        "cosine",
        DataOptions("x.csv"),
        "m",
        optimization=OptimizationOptions(epochs=3),
        run=RunOptions(device="cpu"),
    )
    assert config.to_dict() == FLAT_CONFIG
    assert TrainingConfig.from_dict(FLAT_CONFIG) == config
    assert config.resume_differences(FLAT_CONFIG) == []
    moved = TrainingConfig(
        "cosine",
        DataOptions("x.csv"),
        "m",
        optimization=OptimizationOptions(epochs=3),
        run=RunOptions(device="cuda", checkpoint_every=5, show_progress=False),
    )
    assert moved.resume_differences(FLAT_CONFIG) == []  # no run option changes what is learnt


def test_each_group_checks_its_own_values() -> None:
    with pytest.raises(SemsearchError, match="unknown precision 'fp8'"):
        OptimizationOptions(precision="fp8")  # type: ignore[arg-type]
    with pytest.raises(SemsearchError, match="checkpoint_every must be at least 1, not 0"):
        RunOptions(checkpoint_every=0)
    with pytest.raises(SemsearchError, match="unknown dev task 'nli'"):
        DataOptions("x.csv", dev_task="nli")  # type: ignore[arg-type]
