"""Training a cross-encoder with the bi-encoder trainer's loop, schedule, checkpoints and log.

`CrossEncoderTrainer` subclasses `Trainer`: its loop only needs `loss.make_batch`,
`loss(columns, labels)` and `loss.encoder`, which `PairObjective` provides around a
`CrossEncoder`. What differs is set up here: the starting model (a new head on a
bi-encoder's transformer, or a cross-encoder to train further), the dev measure (the
cross-encoder's own scores), and what is saved (the cross-encoder folder and its card).

Objectives (`TrainingConfig.objective`):

- `bce`: one logit, binary cross-entropy with logits against a target in [0, 1]: the
  `score` column when the data has one (STS-B's gold / 5), else a 0/1 `label`. Chosen over
  the mean squared error of the sigmoid because its gradient on the logit, sigmoid - target,
  is not damped by the sigmoid's slope, so confidently wrong pairs still learn, while its
  minimum is still at sigmoid = target: the scores stay on the gold scale.
- `softmax`: one logit per class, cross-entropy against the class in `label` (SICK).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from scipy import stats
from torch import nn

from semsearch.errors import SemsearchError
from semsearch.evaluation.base import Evaluator
from semsearch.evaluation.pairs import average_precision
from semsearch.evaluation.sts import _correlation
from semsearch.io.corpus import open_corpus
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.models.model_folder import model_kind, resolve_model
from semsearch.options import CROSS_OBJECTIVES
from semsearch.training import checkpoint as ckpt
from semsearch.training.config import TrainingConfig
from semsearch.training.data import (
    TrainingData,
    number_column,
    prepare_training_data,
    split_source,
)
from semsearch.training.report import TrainingResult
from semsearch.training.schedule import BatchSource
from semsearch.training.trainer import Trainer, options_for

TEXT_COLUMNS = ("sentence1", "sentence2")


def train_cross_encoder(config: TrainingConfig, overwrite: bool = False) -> TrainingResult:
    """Train a cross-encoder as `config` says (objective `bce` or `softmax`)."""
    if config.plan is not None:
        raise SemsearchError("a cross-encoder trains on one dataset: a plan is for bi-encoders")
    with ckpt.no_empty_folder_if_refused(config.output_dir):
        trainer = CrossEncoderTrainer(config, overwrite)
    return trainer.run()


class PairObjective(nn.Module):
    """A cross-encoder's loss, called like a siamese one: `loss(columns, labels)`.

    Inputs: columns `sentence1`, `sentence2` (read together as one pair); labels from
    `target`: a float in [0, 1] for one logit (binary cross-entropy with logits), a class
    id for several (cross-entropy).
    """

    def __init__(self, encoder: CrossEncoder, target: str) -> None:
        super().__init__()
        self.encoder = encoder
        self.target = target

    def make_batch(
        self, data: Mapping[str, Sequence], rows: Sequence[int]
    ) -> tuple[list[list[str]], torch.Tensor]:
        columns = [[data[name][row] for row in rows] for name in TEXT_COLUMNS]
        dtype = torch.float32 if self.encoder.num_labels == 1 else torch.long
        return columns, torch.tensor([data[self.target][row] for row in rows], dtype=dtype)

    def forward(self, columns: Sequence[Sequence[str]], labels: torch.Tensor) -> torch.Tensor:
        logits = self.encoder(*self.encoder.features(list(zip(*columns))))
        labels = labels.to(logits.device)
        if self.encoder.num_labels == 1:
            return nn.functional.binary_cross_entropy_with_logits(logits.squeeze(-1), labels)
        return nn.functional.cross_entropy(logits, labels)


class CrossEncoderEvaluator(Evaluator):
    """Scores labelled pairs with a cross-encoder: Spearman (primary) and Pearson against a
    graded `score`, average precision (primary) and accuracy at 0.5 against a 0/1 `label`,
    or, with `classes`, the accuracy of the predicted class."""

    primary_metric = "spearman"

    def __init__(
        self,
        data: TrainingData,
        target: str,
        name: str = "dev",
        classes: bool = False,
        label_names: list[str] | None = None,
        batch_size: int = 64,
    ) -> None:
        super().__init__(name, batch_size)
        missing = [column for column in (*TEXT_COLUMNS, target) if column not in data.columns]
        if missing:
            raise SemsearchError(
                f"{data.source} cannot measure the cross-encoder: it lacks "
                f"{', '.join(missing)} (its columns: {', '.join(data.names)})"
            )
        self.pairs = list(zip(data.columns["sentence1"], data.columns["sentence2"]))
        self.target = target
        self.gold = number_column(data, target, label_names)
        if target != "score":
            self.primary_metric = "accuracy" if classes else "ap"  # type: ignore[misc]

    def evaluate(self, encoder: CrossEncoder) -> dict[str, float]:  # type: ignore[override]
        predicted = encoder.predict(self.pairs, batch_size=self.batch_size)
        if self.target == "score":
            return {
                "spearman": _correlation(stats.spearmanr, predicted, self.gold),
                "pearson": _correlation(stats.pearsonr, predicted, self.gold),
            }
        if predicted.ndim == 1:
            return {
                "ap": average_precision(predicted, self.gold.astype(np.int64)),
                "accuracy": float(np.mean((predicted >= 0.5) == (self.gold > 0))),
            }
        return {"accuracy": float(np.mean(predicted.argmax(axis=1) == self.gold))}


class CrossEncoderTrainer(Trainer):
    """One cross-encoder run: `Trainer`'s loop, with the setup, measure and saving above."""

    # In the saved config, it keeps a bi-encoder run from resuming this checkpoint.
    checkpoint_marks = {"kind": "cross-encoder"}

    def _prepare_data(self) -> TrainingData:
        _check_options(self.config)
        data, self.target = prepare_pair_data(self.config)
        return data

    def _build_objective(self) -> None:
        config = self.config
        self.objective_options = {
            **options_for(config.objective, config.objective_options, self.data),
            "target": self.target,
        }
        model = starting_model(config, self.objective_options.get("num_labels", 1), self.data)
        self.device = model.device
        self.loss = PairObjective(model, self.target)
        self.sources = [BatchSource([self.data.columns[name] for name in TEXT_COLUMNS])]

    def _evaluator(self, data: TrainingData, role: str) -> Evaluator:
        classes = self.config.objective == "softmax"
        return CrossEncoderEvaluator(data, self.target, role, classes, self.data.label_names)

    def _save_model(self) -> None:
        self.loss.encoder.save(self.output_dir)

    def _check_resumable(self, saved_config: dict[str, Any]) -> None:
        if saved_config.get("kind") != "cross-encoder":
            raise SemsearchError(
                f"{self.output_dir} holds the checkpoint of a bi-encoder run: resume it without "
                "--cross-encoder, or pass --overwrite to start again"
            )
        super()._check_resumable({k: v for k, v in saved_config.items() if k != "kind"})

    def _load_kept_model(self) -> CrossEncoder:
        return CrossEncoder.load(str(self.output_dir), device=str(self.device))

    def _model_facts(self) -> dict[str, Any]:
        model = self.loss.encoder
        return {
            "kind": "cross-encoder",
            "provenance": "self-trained: a new classification head on the transformer of "
            f"{self.config.model}, trained here (no pretrained cross-encoder)",
            "num_labels": model.num_labels,
            "max_length": model.max_length,
        }


def prepare_pair_data(config: TrainingConfig) -> tuple[TrainingData, str]:
    """The training pairs and the column the objective learns: `score` or `label`.

    Reads and checks them as the bi-encoder objective with the same columns would (`cosine`
    for scores in [0, 1], `bce` for 0/1 labels, `softmax` for classes).
    """
    if config.objective == "softmax":
        return prepare_training_data("softmax", config.data, config.optimization.seed), "label"
    target = "score" if _has_score(config.data.train, config.data.columns) else "label"
    like = "cosine" if target == "score" else "bce"
    return prepare_training_data(like, config.data, config.optimization.seed), target


def starting_model(config: TrainingConfig, num_labels: int, data: TrainingData) -> CrossEncoder:
    """A cross-encoder to go on training, or a new one on a bi-encoder's weights."""
    folder = resolve_model(config.model)
    if model_kind(folder.path) == "bi-encoder":
        return CrossEncoder.from_encoder(
            config.model, num_labels, label_names=data.label_names, device=config.run.device
        )
    model = CrossEncoder.load(config.model, device=config.run.device)
    if model.num_labels != num_labels:
        raise SemsearchError(
            f"cross-encoder {config.model!r} has {model.num_labels} output(s), the data needs "
            f"{num_labels}: start from a bi-encoder to get a new head"
        )
    return model


def _check_options(config: TrainingConfig) -> None:
    if config.objective not in CROSS_OBJECTIVES:
        raise SemsearchError(
            f"a cross-encoder trains with objective {' or '.join(CROSS_OBJECTIVES)}, "
            f"not {config.objective!r}"
        )
    if config.pooling is not None:
        raise SemsearchError("--pooling is for bi-encoders: a cross-encoder's head reads [CLS]")
    if config.data.form != "none":
        raise SemsearchError(
            "--form derives bi-encoder examples: a cross-encoder reads "
            "sentence1, sentence2 and a score or label as they are"
        )
    unknown = set(config.objective_options) - {"num_labels"}
    if unknown:
        raise SemsearchError(
            f"a cross-encoder objective takes no --option {', '.join(sorted(unknown))}"
        )


def _has_score(source: str, columns: Mapping[str, str]) -> bool:
    """Whether the training data has a `score` column, without reading its rows."""
    reader, path = split_source(source)
    if "score" in columns or reader is not None:  # the shared readers all give `score`
        return True
    return "score" in open_corpus(path).columns
