"""The training config: checked at construction, compared when resuming."""

from __future__ import annotations

import pytest

from semsearch.errors import SemsearchError
from semsearch.training import DataOptions, TrainingConfig


def test_unknown_objective_and_choices_fail_with_the_list(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="unknown objective 'cosin': choose one of softmax"):
        TrainingConfig("cosin", DataOptions("x.csv"), tmp_path)
    with pytest.raises(SemsearchError, match="unknown form 'pairs'"):
        TrainingConfig("mnr", DataOptions("x.csv", form="pairs"), tmp_path)  # type: ignore[arg-type]
    with pytest.raises(SemsearchError, match="batch_size must be at least 1"):
        TrainingConfig("mnr", DataOptions("x.csv"), tmp_path, batch_size=0)


def test_round_trip_and_resume_differences(tmp_path) -> None:
    config = TrainingConfig("online_contrastive", DataOptions("x.csv", columns={"label": "y"}), tmp_path,
                            objective_options={"parts": ("u", "v")})  # fmt: skip
    assert config.objective == "online-contrastive"
    saved = TrainingConfig.from_dict(config.to_dict()).to_dict()
    assert config.resume_differences(saved) == []
    moved = TrainingConfig("online-contrastive", DataOptions("x.csv", columns={"label": "y"}, test="t.csv"),
                           tmp_path / "elsewhere", objective_options={"parts": ["u", "v"]}, eval_every=5)  # fmt: skip
    assert (
        moved.resume_differences(saved) == []
    )  # where and how often to look change nothing learnt
    changed = TrainingConfig("online-contrastive", DataOptions("y.csv"), tmp_path, seed=1)
    assert changed.resume_differences(saved) == [
        "data.columns",
        "data.train",
        "objective_options",
        "seed",
    ]
