"""Siamese training objectives, one per module, all called the same way.

Calling convention (the trainer needs nothing else):

    loss = build_loss("cosine", encoder)              # options go to the class
    columns, labels = loss.make_batch(data, rows)     # data: {column name: values}
    value = loss(columns, labels)                     # a scalar tensor; value.backward()

- `columns` is a list of text columns, each a list of the batch's strings, in the order
  `loss.input_columns(data)` gives: the class's `text_columns`, then those of its
  `optional_text_columns` the data has (mnr's `negative`).
- `labels` is a 1-D tensor, one value per row, read from `label_column` (None for the
  objectives without one: triplet, mnr). Class ids for softmax; 0/1 for bce, contrastive
  and online-contrastive; a similarity in [0, 1] for cosine and cosent.
- Each loss holds the encoder as a submodule (and its head, for softmax and bce), so an
  optimiser over `loss.parameters()` trains everything that should learn.
- `loss.compute(embeddings, labels)` is the same objective on ready sentence vectors.

`require_columns(name, available)` turns a missing column into one clear `SemsearchError`.
For `mnr`, batch with `NoDuplicatesBatchSampler`, so no text is another row's negative.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from semsearch.errors import SemsearchError
from semsearch.losses.base import SiameseLoss
from semsearch.losses.bce import BCEPairLoss
from semsearch.losses.contrastive import ContrastiveLoss
from semsearch.losses.cosent import CoSENTLoss
from semsearch.losses.cosine import CosineLoss
from semsearch.losses.manhattan import MaLSTMLoss, ManhattanSigmoidLoss
from semsearch.losses.mnr import MultipleNegativesRankingLoss
from semsearch.losses.online_contrastive import OnlineContrastiveLoss
from semsearch.losses.sampler import NoDuplicatesBatchSampler
from semsearch.losses.softmax import SoftmaxLoss
from semsearch.losses.triplet import TripletLoss
from semsearch.models import BiEncoder
from semsearch.options import OBJECTIVES, Objective

LOSSES: dict[str, type[SiameseLoss]] = {
    "softmax": SoftmaxLoss,
    "bce": BCEPairLoss,
    "cosine": CosineLoss,
    "cosent": CoSENTLoss,
    "triplet": TripletLoss,
    "contrastive": ContrastiveLoss,
    "online-contrastive": OnlineContrastiveLoss,
    "mnr": MultipleNegativesRankingLoss,
    "l1-sigmoid": ManhattanSigmoidLoss,
    "malstm": MaLSTMLoss,
}


def loss_class(name: str) -> type[SiameseLoss]:
    """The class of an objective; `online_contrastive` is accepted for `online-contrastive`."""
    try:
        return LOSSES[name.replace("_", "-")]
    except KeyError:
        raise SemsearchError(
            f"unknown objective {name!r}: choose one of {', '.join(OBJECTIVES)}"
        ) from None


def build_loss(name: str, encoder: BiEncoder, **options: Any) -> SiameseLoss:
    """An objective bound to `encoder`; `options` are its class's keyword arguments."""
    try:
        return loss_class(name)(encoder, **options)
    except (TypeError, ValueError) as exc:
        raise SemsearchError(f"objective {name!r}: {exc}") from exc


def required_columns(name: str) -> tuple[str, ...]:
    """The columns an objective cannot do without (texts, then the label if it has one)."""
    return loss_class(name).required_columns()


def require_columns(name: str, available: Iterable[str]) -> tuple[str, ...]:
    """Check the data has what `name` needs; return the text columns to feed, in order."""
    available = list(available)
    missing = [column for column in required_columns(name) if column not in available]
    if missing:
        raise SemsearchError(
            f"objective {name!r} needs the column(s) {', '.join(missing)}, but the data has "
            f"{', '.join(available) or 'no columns'}: rename or add them"
        )
    return loss_class(name).input_columns(available)


__all__ = [
    "LOSSES",
    "MaLSTMLoss",
    "ManhattanSigmoidLoss",
    "OBJECTIVES",
    "BCEPairLoss",
    "CoSENTLoss",
    "ContrastiveLoss",
    "CosineLoss",
    "MultipleNegativesRankingLoss",
    "NoDuplicatesBatchSampler",
    "Objective",
    "OnlineContrastiveLoss",
    "SiameseLoss",
    "SoftmaxLoss",
    "TripletLoss",
    "build_loss",
    "loss_class",
    "require_columns",
    "required_columns",
]
