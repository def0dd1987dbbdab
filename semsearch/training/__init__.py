"""Training a bi-encoder with the siamese objectives, and an adapter on frozen vectors.

Each module's one job is listed in docs/architecture.md.

    from semsearch.training import DataOptions, OptimizationOptions, TrainingConfig, train
    config = TrainingConfig("cosine", DataOptions("stsb:train.tsv.gz", dev="stsb:dev.tsv.gz"),
                            output_dir="models/stsb", optimization=OptimizationOptions(epochs=4))
    result = train(config)   # run it again after an interruption: it resumes
    plan = read_plan("plan.yaml")   # several datasets: TrainingConfig(None, None, ..., plan=plan)
"""

from __future__ import annotations

from semsearch.training.adapter import AdapterConfig, AdapterResult, VectorAdapter, train_adapter
from semsearch.training.config import OptimizationOptions, RunOptions, TrainingConfig
from semsearch.training.data import (
    DataOptions,
    TrainingData,
    make_evaluator,
    prepare_training_data,
    read_source,
)
from semsearch.training.formation import form_examples
from semsearch.training.heads import load_head
from semsearch.training.multi import train
from semsearch.training.plan import DatasetSpec, EvaluationSpec, TrainingPlan, read_plan
from semsearch.training.report import TrainingResult
from semsearch.training.vectors import VectorPairs, load_vectors, read_vector_pairs

__all__ = [
    "AdapterConfig",
    "AdapterResult",
    "DataOptions",
    "DatasetSpec",
    "EvaluationSpec",
    "OptimizationOptions",
    "RunOptions",
    "TrainingConfig",
    "TrainingData",
    "TrainingPlan",
    "TrainingResult",
    "VectorAdapter",
    "VectorPairs",
    "form_examples",
    "load_head",
    "load_vectors",
    "make_evaluator",
    "prepare_training_data",
    "read_plan",
    "read_source",
    "read_vector_pairs",
    "train",
    "train_adapter",
]
