"""A fixed batch for every objective, and the one-step check they all must pass."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from semsearch.losses import SiameseLoss

# Related pairs and unrelated pairs, so that every objective has something to learn.
GUITAR = ["A man is playing a guitar.", "A person plays an acoustic guitar on stage."]
CAT = ["The cat sleeps on the sofa.", "A kitten is napping on the couch."]
STOCKS = [
    "Stock markets fell sharply on Monday.",
    "Shares dropped steeply at the start of the week.",
]
LINUX = ["How do I compress a folder on Linux?", "Create a tar.gz archive of a directory."]

BATCH = {
    "sentence1": [GUITAR[0], CAT[0], STOCKS[0], LINUX[0], GUITAR[0], CAT[0]],
    "sentence2": [GUITAR[1], CAT[1], STOCKS[1], LINUX[1], STOCKS[1], LINUX[1]],
    "score": [0.9, 0.85, 0.8, 0.75, 0.1, 0.0],
    "label": [1, 1, 1, 1, 0, 0],
    "anchor": [GUITAR[0], CAT[0], STOCKS[0], LINUX[0], GUITAR[1], CAT[1]],
    "positive": [GUITAR[1], CAT[1], STOCKS[1], LINUX[1], GUITAR[0], CAT[0]],
    "negative": [CAT[0], STOCKS[0], LINUX[0], GUITAR[0], LINUX[1], STOCKS[1]],
}
ROWS = list(range(6))
StepCheck = Callable[[SiameseLoss, dict], tuple[float, float]]


@pytest.fixture()
def batch() -> dict[str, list]:
    return {name: list(values) for name, values in BATCH.items()}


@pytest.fixture()
def one_step() -> StepCheck:
    """Loss on the batch before and after one AdamW step (lr 1e-3) on that batch.

    The tiny encoder is in eval mode (no dropout), so both values are exact, and the
    second must be lower if the gradient points downhill for this objective.
    """

    def run(loss: SiameseLoss, data: dict = BATCH) -> tuple[float, float]:
        columns, labels = loss.make_batch(data, ROWS)
        optimiser = torch.optim.AdamW(loss.parameters(), lr=1e-3)
        before = loss(columns, labels)
        before.backward()
        optimiser.step()
        with torch.no_grad():
            after = loss(columns, labels)
        return before.item(), after.item()

    return run


@pytest.fixture()
def unit() -> Callable[..., torch.Tensor]:
    """`unit([1, 0], [1, 1])`: unit-length rows, for losses computed on hand-made vectors."""

    def make(*rows: list[float]) -> torch.Tensor:
        return torch.nn.functional.normalize(torch.tensor(rows, dtype=torch.float32), dim=1)

    return make
