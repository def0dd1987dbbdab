"""Forming the examples an objective needs from the pairs a data set has.

Scored pairs (`sentence1`, `sentence2`, `score` in [0, 1], as STS-B gives) become:

- `positives`: `anchor`, `positive` from the pairs scoring at least `positive_at`
  (STS-B's 4 of 5 is 0.8), for `mnr`;
- `triplets`: those, plus a `negative` drawn from the texts of the other pairs, for
  `triplet` (or `mnr` with a hard-negative column);
- `binary`: every pair, with `label` 1 when it scores at least `positive_at`, else 0, for
  `bce`, `contrastive` and `online-contrastive`.

Data that already has `anchor` and `positive` (e.g. Debian synopses and descriptions
mapped with `--column anchor=short_description --column positive=long_description`)
keeps them for `positives`, and `triplets` draws its negatives from the other positives.
"""

from __future__ import annotations

import numpy as np

from semsearch.errors import SemsearchError
from semsearch.evaluation.datasets import Columns

SCORED = ("sentence1", "sentence2", "score")
PAIRED = ("anchor", "positive")


def form_examples(columns: Columns, form: str, positive_at: float, seed: int) -> Columns:
    """The columns `form` makes; the original columns are not kept."""
    if form == "binary":
        _require(columns, SCORED, form, alternative="")
        labels = [int(float(score) >= positive_at) for score in columns["score"]]
        return {
            "sentence1": columns["sentence1"],
            "sentence2": columns["sentence2"],
            "label": labels,
        }
    anchors, positives, pool = positive_pairs(columns, positive_at, form)
    if form == "positives":
        return {"anchor": anchors, "positive": positives}
    if form == "triplets":
        negatives = draw_negatives(anchors, positives, pool, seed)
        return {"anchor": anchors, "positive": positives, "negative": negatives}
    raise SemsearchError(f"unknown form {form!r}: choose positives, triplets or binary")


def positive_pairs(
    columns: Columns, positive_at: float, form: str
) -> tuple[list[str], list[str], list[str]]:
    """(anchors, positives, the texts negatives may be drawn from)."""
    if all(name in columns for name in PAIRED):
        anchors, positives = list(columns["anchor"]), list(columns["positive"])
        return anchors, positives, positives
    _require(columns, SCORED, form)
    rows = [row for row, score in enumerate(columns["score"]) if float(score) >= positive_at]
    anchors = [columns["sentence1"][row] for row in rows]
    positives = [columns["sentence2"][row] for row in rows]
    pool = [*columns["sentence1"], *columns["sentence2"]]
    if not rows:
        raise SemsearchError(f"no pair scores at least {positive_at}: lower --positive-at")
    return anchors, positives, pool


def draw_negatives(
    anchors: list[str], positives: list[str], pool: list[str], seed: int
) -> list[str]:
    """For each row, a random text of the pool that is neither its anchor nor its positive."""
    texts = list(dict.fromkeys(pool))  # distinct, in a fixed order, so the seed decides
    if len(texts) < 3:
        raise SemsearchError("too few distinct texts to draw negatives from (need 3 or more)")
    rng = np.random.default_rng(seed)
    negatives = []
    for anchor, positive in zip(anchors, positives):
        negative = texts[rng.integers(len(texts))]
        while negative in (anchor, positive):
            negative = texts[rng.integers(len(texts))]
        negatives.append(negative)
    return negatives


def _require(
    columns: Columns,
    needed: tuple[str, ...],
    form: str,
    alternative: str = " (or anchor, positive)",
) -> None:
    missing = [name for name in needed if name not in columns]
    if missing:
        raise SemsearchError(
            f"--form {form} needs the columns {', '.join(needed)}{alternative}, "
            f"but the data has {', '.join(columns) or 'none'}"
        )
