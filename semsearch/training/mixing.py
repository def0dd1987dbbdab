"""The order of batches when several datasets train one model: each batch comes from one
dataset (an objective sees only its own kind of example), and the datasets take turns.

- `round-robin`: one batch of each dataset in turn; the epoch ends when the dataset with
  the fewest batches runs out, so every dataset gets the same number of steps, and a large
  one is seen only in part (a different part each epoch, as its batches are reshuffled).
- `proportional`: every batch of every dataset once per epoch, in a shuffled order, so each
  dataset gets steps in proportion to its size.

These follow sentence-transformers' `RoundRobinBatchSampler` and `ProportionalBatchSampler`.
Like `schedule.epoch_batches`, the order is a pure function of (seed, epoch), so a resumed
run skips exactly the batches it had done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from semsearch.training.schedule import epoch_batches

# Keeps the datasets' shuffles apart when they share the run's seed.
DATASET_SEED_STRIDE = 1_000_003


@dataclass(frozen=True)
class BatchSource:
    """What the order needs of one dataset: its text columns, and whether a batch must
    hold no repeated text (in-batch negatives)."""

    columns: Sequence[Sequence[str]]
    no_duplicates: bool = False


def mixed_batches(
    sources: Sequence[BatchSource], batch_size: int, seed: int, epoch: int, mixing: str
) -> list[tuple[int, list[int]]]:
    """(dataset number, row indices) of each batch of `epoch`, in training order."""
    per_dataset = [
        epoch_batches(
            source.columns,
            batch_size,
            seed + DATASET_SEED_STRIDE * number,
            epoch,
            source.no_duplicates,
        )
        for number, source in enumerate(sources)
    ]
    if mixing == "round-robin":
        turns = min(len(batches) for batches in per_dataset)
        return [
            (number, per_dataset[number][turn])
            for turn in range(turns)
            for number in range(len(sources))
        ]
    if mixing != "proportional":
        raise ValueError(f"unknown mixing {mixing!r}")
    order = np.repeat(np.arange(len(sources)), [len(batches) for batches in per_dataset])
    np.random.default_rng((seed, epoch, len(sources))).shuffle(order)
    taken = [0] * len(sources)
    batches = []
    for number in order.tolist():
        batches.append((number, per_dataset[number][taken[number]]))
        taken[number] += 1
    return batches


def mixed_steps(
    sources: Sequence[BatchSource],
    batch_size: int,
    seed: int,
    epochs: int,
    mixing: str,
    max_steps: int | None,
) -> int:
    """Steps the schedule spans: `max_steps`, or every mixed batch of every epoch."""
    if max_steps is not None:
        return max_steps
    return sum(
        len(mixed_batches(sources, batch_size, seed, epoch, mixing)) for epoch in range(epochs)
    )
