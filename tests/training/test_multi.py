"""Multi-dataset training on the tiny model: cosent on STS pairs and mnr on retrieval pairs in
one run, a combined dev metric picking the checkpoint, resume, and bad plans refused early."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli.support import error_line, runner
from safetensors.numpy import load_file

from semsearch.cli.app import app
from semsearch.errors import SemsearchError
from semsearch.training import OptimizationOptions, RunOptions, TrainingConfig, train
from semsearch.training.multi import MultiDatasetTrainer
from semsearch.training.plan import TrainingPlan

PAIR_COLUMNS = {"anchor": "question", "positive": "answer"}


@pytest.fixture()
def plan_values(stsb_file: Path, pairs_file: Path) -> dict:
    return {
        "mixing": "round-robin",
        "datasets": [
            {"name": "sts", "source": f"stsb:{stsb_file}", "objective": "cosent"},
            {
                "name": "pairs",
                "source": str(pairs_file),
                "objective": "mnr",
                "columns": PAIR_COLUMNS,
            },
        ],
        "dev": [
            {"name": "sts-dev", "source": f"stsb:{stsb_file}", "task": "sts"},
            {"name": "ir-dev", "source": str(pairs_file), "task": "ir", "columns": PAIR_COLUMNS},
        ],
    }


def _config(
    tmp_path: Path, model: Path, values: dict, output: str = "run", **optimization
) -> TrainingConfig:
    settings = {"epochs": 2, "batch_size": 4, "learning_rate": 1e-3, **optimization}
    return TrainingConfig(
        objective=None,
        data=None,
        output_dir=tmp_path / output,
        model=str(model),
        plan=TrainingPlan.from_dict(values),
        optimization=OptimizationOptions(**settings),
        run=RunOptions(log_every=1, device="cpu", show_progress=False, eval_every=2),
    )


def _records(folder: Path, event: str) -> list[dict]:
    lines = (folder / "train_log.jsonl").read_text().splitlines()
    return [record for record in map(json.loads, lines) if record["event"] == event]


def test_two_objectives_train_one_model_kept_by_the_combined_dev_metric(
    tmp_path, tiny_model_dir, plan_values
) -> None:
    config = _config(tmp_path, tiny_model_dir, plan_values)
    result = train(config)
    # 16 pairs in batches of 4: 4 batches each, round-robin 8 steps an epoch
    assert result.steps == 16 and result.dev_primary == "combined"
    evaluations = [r for r in _records(config.output_dir, "eval") if not r["baseline"]]
    for record in evaluations:
        metrics = record["metrics"]
        expected = (metrics["sts-dev/spearman_cosine"] + metrics["ir-dev/ndcg@10"]) / 2
        assert record["value"] == pytest.approx(expected)
    best = max(evaluations, key=lambda record: record["value"])
    assert (result.dev_best, result.dev_best_step) == (best["value"], best["step"])
    record = json.loads((config.output_dir / "training.json").read_text())
    assert record["config"]["objective"] == "cosent+mnr"
    assert record["data"]["mixing"] == "round-robin"
    assert record["data"]["train"]["pairs"]["objective"] == "mnr"
    assert (
        "combined = (1 x sts-dev spearman_cosine + 1 x ir-dev ndcg@10) / 2"
        in (config.output_dir / "README.md").read_text()
    )
    assert (config.output_dir / "model.safetensors").is_file()


def test_each_batch_goes_to_its_own_dataset_s_loss(tmp_path, tiny_model_dir, plan_values) -> None:
    trainer = MultiDatasetTrainer(_config(tmp_path, tiny_model_dir, plan_values, max_steps=4))
    seen = []
    for number, loss in enumerate(trainer.loss.losses):
        original = loss.forward
        loss.forward = lambda columns, labels, n=number, f=original: (
            seen.append(n) or f(columns, labels)
        )
    trainer.run()
    assert seen == [0, 1, 0, 1]
    assert trainer.loss.losses[0].encoder is trainer.loss.losses[1].encoder is trainer.loss.encoder


def test_an_interrupted_plan_resumes_where_it_stopped(
    tmp_path, tiny_model_dir, plan_values, monkeypatch
) -> None:
    plan_values = {**plan_values, "mixing": "proportional"}
    reference = train(_config(tmp_path, tiny_model_dir, plan_values, "whole"))
    original_step = MultiDatasetTrainer._step

    def interrupted(self, batch):
        if self.state.step == 5:
            raise KeyboardInterrupt
        return original_step(self, batch)

    monkeypatch.setattr(MultiDatasetTrainer, "_step", interrupted)
    config = _config(tmp_path, tiny_model_dir, plan_values, "parts")
    with pytest.raises(KeyboardInterrupt):
        train(config)
    monkeypatch.setattr(MultiDatasetTrainer, "_step", original_step)
    resumed = train(config)
    assert resumed.resumed_from == 4 and resumed.steps == reference.steps
    whole, parts = (_records(tmp_path / name, "train") for name in ("whole", "parts"))
    assert [r["loss"] for r in parts] == pytest.approx([r["loss"] for r in whole], abs=1e-5)
    final, expected = (
        load_file(str(tmp_path / name / "model.safetensors")) for name in ("parts", "whole")
    )
    assert all(np.allclose(final[key], expected[key], atol=1e-5) for key in expected)


def test_columns_that_do_not_fit_an_objective_fail_before_anything_is_written(
    tmp_path, tiny_model_dir, plan_values
) -> None:
    plan_values["datasets"][1]["columns"] = {"anchor": "question"}  # mnr needs a positive too
    config = _config(tmp_path, tiny_model_dir, plan_values)
    with pytest.raises(
        SemsearchError, match="dataset 'pairs': .* needs the column\\(s\\) positive"
    ):
        train(config)
    assert not config.output_dir.exists()


def test_cli_trains_a_plan_and_refuses_bad_ones_in_one_line(
    tmp_path, tiny_model_dir, plan_values
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_values))
    output = tmp_path / "model"
    base = [
        "train",
        "--plan",
        str(plan),
        "-o",
        str(output),
        "--model",
        str(tiny_model_dir),
        "--batch-size",
        "4",
        "--max-steps",
        "2",
        "--device",
        "cpu",
    ]
    result = runner.invoke(app, [*base, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["dev_primary"] == "combined"

    clash = runner.invoke(app, [*base[:1], "stsb:x", *base[1:], "--objective", "mnr"])
    assert "drop DATA, --objective" in error_line(clash)
    plan_values["datasets"][0]["objective"] = "cosnet"
    plan.write_text(json.dumps(plan_values))
    fresh = tmp_path / "fresh"
    bad = runner.invoke(app, ["train", "--plan", str(plan), "-o", str(fresh)])
    assert "dataset 'sts': unknown objective 'cosnet'" in error_line(bad)
    assert not fresh.exists()
