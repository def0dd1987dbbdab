"""The order of the batches, the optimiser and the learning-rate schedule.

Batches are a pure function of (seed, epoch), so a resumed run sees exactly the batches
an uninterrupted one would: it skips the ones its checkpoint says are done.

When several datasets train one model, each batch comes from one dataset (an objective
sees only its own kind of example), and the datasets take turns, as sentence-transformers'
`RoundRobinBatchSampler` and `ProportionalBatchSampler` do:

- `round-robin`: one batch of each dataset in turn; the epoch ends when the dataset with
  the fewest batches runs out, so every dataset gets the same number of steps, and a large
  one is seen only in part (a different part each epoch, as its batches are reshuffled).
- `proportional`: every batch of every dataset once per epoch, in a shuffled order, so each
  dataset gets steps in proportion to its size.

One dataset is the round-robin of one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from semsearch.errors import SemsearchError
from semsearch.losses import NoDuplicatesBatchSampler
from semsearch.training.checkpoint import Trainables
from semsearch.training.config import OptimizationOptions

# Parameters that SBERT (and BERT) exclude from weight decay.
NO_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias")
# Keeps the datasets' shuffles apart when they share the run's seed.
DATASET_SEED_STRIDE = 1_000_003


def epoch_batches(
    columns: Sequence[Sequence[str]],
    batch_size: int,
    seed: int,
    epoch: int,
    no_duplicates: bool,
) -> list[list[int]]:
    """Row indices per batch for `epoch`: a seeded shuffle, or with `no_duplicates` (for
    in-batch negatives) batches in which no text of `columns` occurs twice."""
    if no_duplicates:
        sampler = NoDuplicatesBatchSampler(columns, batch_size, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)
    order = np.random.default_rng((seed, epoch)).permutation(len(columns[0])).tolist()
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


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
    turns = [iter(batches) for batches in per_dataset]
    return [(number, next(turns[number])) for number in order.tolist()]


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


def make_optimizer(
    model: nn.Module, learning_rate: float, weight_decay: float
) -> torch.optim.AdamW:
    """AdamW over every trainable parameter of `model` (encoder and head), with no decay on
    biases and LayerNorm weights."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (no_decay if any(part in name for part in NO_DECAY) else decay).append(parameter)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW([group for group in groups if group["params"]], lr=learning_rate)


def warmup_linear(optimizer: torch.optim.Optimizer, warmup_steps: int, steps: int) -> LambdaLR:
    """Linear warm-up from 0 to the learning rate over `warmup_steps`, then linear decay to 0
    at `steps`."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (steps - step) / max(1, steps - warmup_steps))

    return LambdaLR(optimizer, factor)


def make_trainables(
    loss: nn.Module, options: OptimizationOptions, device: torch.device, warmup: int, steps: int
) -> Trainables:
    """The optimiser, its warm-up-then-linear schedule and the fp16 loss scaler for `loss`."""
    if options.precision == "fp16" and device.type != "cuda":
        raise SemsearchError("fp16 training needs a CUDA GPU: use bf16 or fp32 on the CPU")
    optimizer = make_optimizer(loss, options.learning_rate, options.weight_decay)
    scheduler = warmup_linear(optimizer, warmup, steps)
    # Loss scaling is for fp16 only; disabled, the scaler passes every call through.
    scaler = torch.amp.GradScaler(device.type, enabled=options.precision == "fp16")
    return Trainables(loss, optimizer, scheduler, scaler)
