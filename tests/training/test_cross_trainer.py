"""Training a cross-encoder with the trainer's loop: the loss falls, the best model is kept
and reloads, a run resumes, and options that make no sense for it are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from scipy import stats
from training.tiny_data import PAIRS

from semsearch.errors import SemsearchError
from semsearch.evaluation import read_stsb
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.training import train
from semsearch.training.cross_trainer import (
    CrossEncoderTrainer,
    PairObjective,
    train_cross_encoder,
)
from semsearch.training.trainer import Trainer


def _pairs_loss(model: CrossEncoder) -> float:
    """Mean binary cross-entropy of `model` over the tiny STS-B pairs, without dropout."""
    model.eval()
    objective = PairObjective(model, "score")
    rows = list(range(len(PAIRS)))
    data = {
        "sentence1": [p[0] for p in PAIRS],
        "sentence2": [p[1] for p in PAIRS],
        "score": [p[2] / 5 for p in PAIRS],
    }
    with torch.inference_mode():
        return float(objective(*objective.make_batch(data, rows)))


def test_a_few_steps_lower_the_loss_and_the_folder_is_a_cross_encoder(
    quick_config, tiny_model_dir, stsb_file
) -> None:
    # Without dev data the folder keeps the last step's model.
    config = quick_config(objective="bce", epochs=8, learning_rate=1e-2, data={"dev": None})
    torch.manual_seed(config.optimization.seed)
    before = _pairs_loss(CrossEncoder.from_encoder(str(tiny_model_dir), device="cpu"))
    result = train_cross_encoder(config)
    after = _pairs_loss(CrossEncoder.load(str(config.output_dir), device="cpu"))
    # Soft targets: the loss cannot fall below their entropy, so compare the excess over it.
    targets = np.array([pair[2] / 5 for pair in PAIRS]).clip(1e-6, 1 - 1e-6)
    floor = float(np.mean(-(targets * np.log(targets) + (1 - targets) * np.log(1 - targets))))
    assert after - floor < 0.6 * (before - floor)
    assert result.steps == 32 and result.dev_primary is None
    record = json.loads((config.output_dir / "training.json").read_text())
    assert record["kind"] == "cross-encoder" and "self-trained" in record["provenance"]
    assert "self-trained" in (config.output_dir / "README.md").read_text().lower()


def test_the_kept_model_is_the_best_on_dev(quick_config, stsb_file) -> None:
    result = train_cross_encoder(quick_config(objective="bce"))
    saved = CrossEncoder.load(str(result.output_dir), device="cpu")
    gold = read_stsb(stsb_file)
    predicted = saved.predict(list(zip(gold["sentence1"], gold["sentence2"])))
    assert result.dev_primary == "spearman"
    assert stats.spearmanr(predicted, gold["score"])[0] == pytest.approx(result.dev_best, abs=1e-6)


def test_test_data_is_measured_with_the_kept_model(quick_config, stsb_file) -> None:
    config = quick_config(objective="bce", max_steps=2, data={"test": f"stsb:{stsb_file}"})
    result = train_cross_encoder(config)
    assert set(result.test_metrics or {}) == {"spearman", "pearson"}


def test_softmax_learns_classes_and_binary_labels_give_average_precision(
    quick_config, sick_file, pairs_file
) -> None:
    sick = f"sick:{sick_file}"
    classes = train_cross_encoder(
        quick_config("nli", objective="softmax", max_steps=2, data={"train": sick, "dev": sick})
    )
    assert classes.dev_primary == "accuracy"
    assert CrossEncoder.load(str(classes.output_dir), device="cpu").num_labels == 3
    mapping = {"sentence1": "question", "sentence2": "answer", "label": "is_dup"}
    options = {"train": str(pairs_file), "dev": str(pairs_file), "columns": mapping}
    binary = train_cross_encoder(quick_config("dup", objective="bce", max_steps=2, data=options))
    assert binary.dev_primary == "ap" and 0 <= (binary.dev_best or 0) <= 1


def test_an_interrupted_run_resumes_and_ends_where_an_uninterrupted_one_ends(
    quick_config, monkeypatch
) -> None:
    options = {"objective": "bce", "epochs": 2, "checkpoint_every": 3}  # 8 steps
    reference = train_cross_encoder(quick_config("whole", **options))
    original_step = CrossEncoderTrainer._step

    def interrupted_step(self, rows):
        if self.state.step == 5:
            raise KeyboardInterrupt
        return original_step(self, rows)

    monkeypatch.setattr(CrossEncoderTrainer, "_step", interrupted_step)
    config = quick_config("interrupted", **options)
    with pytest.raises(KeyboardInterrupt):
        train_cross_encoder(config)
    monkeypatch.setattr(CrossEncoderTrainer, "_step", original_step)
    resumed = train_cross_encoder(config)
    assert resumed.resumed_from == 4 and resumed.steps == reference.steps == 8
    final, expected = (
        load_file(str(c.output_dir / "model.safetensors")) for c in (config, quick_config("whole"))
    )
    assert all(np.allclose(final[key], expected[key], atol=1e-6) for key in expected)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"objective": "cosine"}, "trains with objective bce or softmax"),
        ({"objective": "bce", "pooling": "cls"}, "--pooling is for bi-encoders"),
        ({"objective": "bce", "objective_options": {"margin": 1}}, "takes no --option margin"),
    ],
)
def test_options_that_fit_no_cross_encoder_are_refused(quick_config, changes, message) -> None:
    with pytest.raises(SemsearchError, match=message):
        train_cross_encoder(quick_config(**changes))


def test_a_cross_encoder_is_trained_further_only_with_as_many_outputs(
    quick_config, sick_file
) -> None:
    first = train_cross_encoder(quick_config("first", objective="bce", max_steps=1))
    sick = f"sick:{sick_file}"
    again = quick_config(
        "again",
        objective="softmax",
        model=str(first.output_dir),
        max_steps=1,
        data={"train": sick, "dev": sick},
    )
    with pytest.raises(SemsearchError, match="has 1 output"):
        train_cross_encoder(again)


def test_a_checkpoint_resumes_only_as_the_kind_of_model_it_was(
    quick_config, pairs_file, monkeypatch
) -> None:
    mapping = {"sentence1": "question", "sentence2": "answer", "label": "is_dup"}
    data = {"train": str(pairs_file), "dev": None, "columns": mapping}
    for trainer, run, other in (
        (CrossEncoderTrainer, train_cross_encoder, train),
        (Trainer, train, train_cross_encoder),
    ):
        config = quick_config(trainer.__name__, objective="bce", checkpoint_every=1, data=data)
        original = trainer._step

        def interrupted(self, rows, original=original):
            if self.state.step == 2:
                raise KeyboardInterrupt
            return original(self, rows)

        monkeypatch.setattr(trainer, "_step", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run(config)
        monkeypatch.setattr(trainer, "_step", original)
        with pytest.raises(SemsearchError, match="bi-encoder run|other options \\(kind\\)"):
            other(config)
