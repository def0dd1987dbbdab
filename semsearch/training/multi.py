"""Training one bi-encoder on several datasets at once, each with its own objective; and
`train`, the one entry point, which runs a config on one dataset or on such a plan.

Why: fine-tuning on STS-B alone raises STS-B and lowers retrieval (the model forgets what
made it a good search encoder); mixing in retrieval pairs with an in-batch-negatives
objective keeps that skill while the STS objective sharpens similarity. A `TrainingPlan`
says which datasets, objectives and dev sets; `MultiDatasetTrainer` is `Trainer` with:

- one loss per dataset, all around the same encoder (`MultiObjective`), each batch drawn
  from one dataset and fed to that dataset's loss (times its weight);
- the batch order of `semsearch.training.schedule` (round-robin or proportional);
- dev (and test) as a `CombinedEvaluator`: the best checkpoint is the one with the best
  weighted mean of the dev sets' primary metrics.

Checkpoints, the log, resuming and the output folder are the one-dataset run's.
Heads of `softmax` / `bce` datasets train with the encoder but are not saved.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from semsearch.errors import SemsearchError
from semsearch.evaluation.combined import CombinedEvaluator
from semsearch.losses import SiameseLoss, build_loss
from semsearch.models import BiEncoder
from semsearch.training import checkpoint as ckpt
from semsearch.training.config import TrainingConfig
from semsearch.training.data import (
    TrainingData,
    make_evaluator,
    prepare_training_data,
    read_eval_data,
)
from semsearch.training.plan import DatasetSpec, EvaluationSpec, TrainingPlan
from semsearch.training.report import TrainingResult
from semsearch.training.schedule import BatchSource
from semsearch.training.trainer import Trainer, data_summary, options_for


def train(config: TrainingConfig, overwrite: bool = False) -> TrainingResult:
    """Train as `config` says; with `overwrite`, a previous run in the folder is replaced.
    A config with a `plan` trains on its several datasets."""
    with ckpt.no_empty_folder_if_refused(config.output_dir):
        if config.plan is not None:
            trainer: Trainer = MultiDatasetTrainer(config, overwrite)
        else:
            trainer = Trainer(config, overwrite)
    return trainer.run()


class MultiObjective(nn.Module):
    """The losses of a plan's datasets around one shared encoder; `loss(number, columns,
    labels)` is dataset `number`'s loss times its weight."""

    def __init__(self, encoder: BiEncoder, losses: list[SiameseLoss], weights: list[float]) -> None:
        super().__init__()
        self.encoder = encoder
        self.losses = nn.ModuleList(losses)
        self.weights = weights

    def forward(
        self, number: int, columns: list[list[str]], labels: torch.Tensor | None
    ) -> torch.Tensor:
        return self.losses[number](columns, labels) * self.weights[number]


class MultiDatasetTrainer(Trainer):
    """A run of a `TrainingPlan` (see the module's docstring)."""

    @property
    def plan(self) -> TrainingPlan:
        assert self.config.plan is not None
        return self.config.plan

    def _prepare_data(self) -> TrainingData:
        """Every dataset read and checked for its objective, before anything is written."""
        seed = self.config.optimization.seed
        self.datasets = [_prepared(spec, seed) for spec in self.plan.datasets]
        return self.datasets[0]

    def _build_objective(self) -> None:
        encoder = self._load_encoder()
        losses, self.objective_options = [], {}
        for spec, data in zip(self.plan.datasets, self.datasets):
            options = self.objective_options[spec.name] = options_for(
                spec.objective, spec.options, data
            )
            try:
                losses.append(build_loss(spec.objective, encoder, **options))
            except SemsearchError as exc:
                raise SemsearchError(f"dataset {spec.name!r}: {exc}") from None
        self.loss = MultiObjective(encoder, losses, [spec.weight for spec in self.plan.datasets])
        self.sources = [
            BatchSource(
                [data.columns[name] for name in loss.input_columns(data.names)],
                no_duplicates=spec.objective == "mnr",
            )
            for spec, data, loss in zip(self.plan.datasets, self.datasets, losses)
        ]

    def _mixing(self) -> str:
        return self.plan.mixing

    def _batch_loss(self, batch: tuple[int, list[int]]) -> torch.Tensor:
        number, rows = batch
        loss = self.loss.losses[number]
        columns, labels = loss.make_batch(self.datasets[number].columns, rows)
        return self.loss(number, columns, labels)

    def _evaluation_data(self, role: str):
        specs: list[EvaluationSpec] = getattr(self.plan, role)
        if not specs:
            return None, None
        sets, evaluators = [], []
        for spec in specs:
            try:
                data = read_eval_data(spec.source, spec.data_options())
                evaluators.append(make_evaluator(data, spec.task, spec.name))
            except SemsearchError as exc:
                raise SemsearchError(f"{role} set {spec.name!r}: {exc}") from None
            sets.append(data)
        combined = CombinedEvaluator(evaluators, [spec.weight for spec in specs], name=role)
        return sets, combined

    def _save_model(self) -> None:
        self.loss.encoder.save(self.output_dir)

    def _data_summary(self) -> dict[str, Any]:
        summaries = {}
        for spec, data in zip(self.plan.datasets, self.datasets):
            summaries[spec.name] = {
                **data.summary(),
                "objective": spec.objective,
                "weight": spec.weight,
            }
        evaluations = {}
        for role in ("dev", "test"):
            sets = getattr(self, role) or []
            evaluator = getattr(self, f"{role}_evaluator")
            evaluations[role] = (
                None
                if evaluator is None
                else {
                    "combined": evaluator.describe(),
                    "sets": {
                        spec.name: data_summary(data)
                        for spec, data in zip(getattr(self.plan, role), sets)
                    },
                }
            )
        return {"mixing": self.plan.mixing, "train": summaries, **evaluations}


def _prepared(spec: DatasetSpec, seed: int) -> TrainingData:
    try:
        return prepare_training_data(spec.objective, spec.data_options(), seed)
    except SemsearchError as exc:
        raise SemsearchError(f"dataset {spec.name!r}: {exc}") from None
