"""`train`: the one entry point that runs a config, on one dataset or on a plan of several.

Why a module of its own: it chooses between the one-dataset loop (`trainer.py`) and the
plan's loop (`multi.py`, built on it), so it sits above both.
"""

from __future__ import annotations

from semsearch.training import checkpoint as ckpt
from semsearch.training.config import TrainingConfig
from semsearch.training.multi import MultiDatasetTrainer
from semsearch.training.report import TrainingResult
from semsearch.training.trainer import Trainer


def train(config: TrainingConfig, overwrite: bool = False) -> TrainingResult:
    """Train as `config` says; with `overwrite`, a previous run in the folder is replaced.
    A config with a `plan` trains on its several datasets (`semsearch.training.multi`)."""
    with ckpt.no_empty_folder_if_refused(config.output_dir):
        if config.plan is not None:
            trainer: Trainer = MultiDatasetTrainer(config, overwrite)
        else:
            trainer = Trainer(config, overwrite)
    return trainer.run()
