"""Evaluation: one evaluator per task, all called as `evaluator(encoder) -> {metric: value}`.

- `sts`: Spearman / Pearson of four similarity functions against graded pairs.
- `pairs`: binary pair classification at dev-chosen thresholds, and average precision.
- `ir`: nDCG, MRR, recall and MAP of exact search on a BEIR-format folder.
- `combined`: several evaluators as one, the weighted mean of their primaries (training
  on several datasets keeps the checkpoint that is best on it).
- `heatmap`: a PNG of the similarities among a few sentences.
- `datasets` and `beir`: readers for the shared STS-B, SICK and BEIR files.
- `tasks`: the `semsearch eval` subcommands as functions (`evaluate_sts`, `evaluate_pairs`,
  `evaluate_ir`, `evaluate_heatmap`): data read, model (or index) loaded, figures timed.
  Import it as `semsearch.evaluate`: it reaches into training, models and indexes,
  which this package's evaluators do not need.
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
