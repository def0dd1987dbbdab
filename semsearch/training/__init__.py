"""Training a bi-encoder with the siamese objectives, and an adapter on frozen vectors.

The flow, one module per stage:

    config.py     TrainingConfig: every option of a run, grouped in DataOptions
                  (data_options.py),
                  OptimizationOptions and RunOptions
    data.py       a file (or `stsb:` / `sick:` reader) -> named columns -> checked, labelled
    formation.py  scored pairs -> positives, triplets or binary pairs
    schedule.py   seeded batches (no duplicate texts for mnr), AdamW, warm-up + linear decay
    trainer.py    the loop: steps, dev checks, best model, checkpoints, resume
    run.py        train(config): the one-dataset loop or a plan's
    plan.py       a training plan: several datasets, each with its objective, and dev sets
    mixing.py     the batch order of several datasets (round-robin or proportional)
    multi.py      the loop for a plan: one loss per dataset on one encoder, combined dev
    dev.py        which evaluator measures dev/test data (sts, pairs, ir)
    checkpoint.py the resumable state in <output>/checkpoint/, the output folder's rules
    report.py     train_log.jsonl and training.png;  card.py: the README.md model card
    heads.py      the softmax / bce heads saved in <output>/head/
    vectors.py, adapter.py  an MLP adapter trained on ready-made vectors

    from semsearch.training import DataOptions, OptimizationOptions, TrainingConfig, train
    config = TrainingConfig("cosine", DataOptions("stsb:train.tsv.gz", dev="stsb:dev.tsv.gz"),
                            output_dir="models/stsb", optimization=OptimizationOptions(epochs=4))
    result = train(config)   # run it again after an interruption: it resumes
    plan = read_plan("plan.yaml")   # several datasets: TrainingConfig(None, None, ..., plan=plan)
"""

from __future__ import annotations

from semsearch.training.adapter import AdapterConfig, AdapterResult, VectorAdapter, train_adapter
from semsearch.training.config import OptimizationOptions, RunOptions, TrainingConfig
from semsearch.training.data import TrainingData, prepare_training_data, read_source
from semsearch.training.data_options import DataOptions
from semsearch.training.dev import make_evaluator
from semsearch.training.formation import form_examples
from semsearch.training.heads import load_head
from semsearch.training.plan import DatasetSpec, EvaluationSpec, TrainingPlan, read_plan
from semsearch.training.report import TrainingResult
from semsearch.training.run import train
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
