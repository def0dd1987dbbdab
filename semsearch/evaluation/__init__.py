"""Evaluation: one evaluator per task, all called as `evaluator(encoder) -> {metric: value}`.

The `semsearch eval` subcommands as functions are in `semsearch.evaluate`, which reaches
into training, models and indexes, which these evaluators do not need.
"""

from __future__ import annotations

from semsearch.evaluation.base import Evaluator, TextEncoder
from semsearch.evaluation.beir import RetrievalData, read_beir
from semsearch.evaluation.combined import CombinedEvaluator
from semsearch.evaluation.datasets import SICK_LABELS, read_sick, read_stsb
from semsearch.evaluation.heatmap import similarity_heatmap
from semsearch.evaluation.ir import InformationRetrievalEvaluator, exact_search, ir_metrics
from semsearch.evaluation.pairs import LabelledPairs, PairClassificationEvaluator
from semsearch.evaluation.sts import STSEvaluator, sts_metrics

__all__ = [
    "SICK_LABELS",
    "CombinedEvaluator",
    "Evaluator",
    "InformationRetrievalEvaluator",
    "LabelledPairs",
    "PairClassificationEvaluator",
    "RetrievalData",
    "STSEvaluator",
    "TextEncoder",
    "exact_search",
    "ir_metrics",
    "read_beir",
    "read_sick",
    "read_stsb",
    "similarity_heatmap",
    "sts_metrics",
]
