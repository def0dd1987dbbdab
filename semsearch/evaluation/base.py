"""What every evaluator shares: called on an encoder, it returns named metrics."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Protocol

import numpy as np
from torch import nn

from semsearch.models.prompts import encode_queries


class TextEncoder(Protocol):
    """Anything that embeds texts: a `BiEncoder`, or a wrapper around an index's encoder.

    Evaluators that show progress also pass `show_progress=True`, as `BiEncoder.encode` takes it.
    """

    def encode(self, texts: Sequence[str], batch_size: int = ...) -> np.ndarray: ...


class Evaluator(ABC):
    """`evaluator(encoder) -> {metric: value}`; `primary_metric` names the one to select on.

    The encoder is put in eval mode for the measurement (no dropout) and given back in the
    mode it came in, so a training loop can call an evaluator between steps.
    """

    primary_metric: ClassVar[str]

    def __init__(self, name: str, batch_size: int = 64) -> None:
        self.name = name
        self.batch_size = batch_size
        self.show_progress = False  # a bar of the texts encoded (`semsearch eval`)

    def __call__(self, encoder: TextEncoder) -> dict[str, float]:
        was_training = isinstance(encoder, nn.Module) and encoder.training
        if isinstance(encoder, nn.Module):
            encoder.eval()
        try:
            return self.evaluate(encoder)
        finally:
            if was_training:
                encoder.train()

    @abstractmethod
    def evaluate(self, encoder: TextEncoder) -> dict[str, float]:
        """The metrics, computed without changing the encoder's mode."""

    def primary(self, metrics: dict[str, float]) -> float:
        return metrics[self.primary_metric]


def encode_pairs(
    encoder: TextEncoder,
    first: Sequence[str],
    second: Sequence[str],
    batch_size: int,
    show_progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectors for both sides of a list of pairs, encoding each distinct text once (with a
    bar of them where `show_progress`)."""
    unique = list(dict.fromkeys([*first, *second]))
    shown = {"show_progress": True} if show_progress else {}  # any encoder works without it
    vectors = encode_queries(encoder, unique, batch_size=batch_size, **shown)  # symmetric
    row = {text: index for index, text in enumerate(unique)}
    return vectors[[row[text] for text in first]], vectors[[row[text] for text in second]]
