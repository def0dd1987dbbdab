"""Batch order, optimiser groups and the warm-up schedule."""

from __future__ import annotations

import pytest
import torch

from semsearch.training.schedule import (
    BatchSource,
    epoch_batches,
    make_optimizer,
    mixed_steps,
    warmup_linear,
)


def test_batches_cover_every_row_once_and_depend_only_on_seed_and_epoch() -> None:
    columns = [[f"t{i}" for i in range(10)]]
    batches = epoch_batches(columns, 4, seed=3, epoch=0, no_duplicates=False)
    assert [len(b) for b in batches] == [4, 4, 2] and sorted(sum(batches, [])) == list(range(10))
    assert batches == epoch_batches(columns, 4, seed=3, epoch=0, no_duplicates=False)
    assert batches != epoch_batches(columns, 4, seed=3, epoch=1, no_duplicates=False)
    one = [BatchSource(columns)]
    assert mixed_steps(one, 4, 3, epochs=2, mixing="round-robin", max_steps=None) == 6
    assert mixed_steps(one, 4, 3, epochs=2, mixing="round-robin", max_steps=5) == 5


def test_in_batch_negative_batches_hold_no_text_twice() -> None:
    anchors = ["same", "same", "a", "b", "c", "same"]
    positives = ["p1", "p2", "p3", "p4", "p5", "p6"]
    for batch in epoch_batches([anchors, positives], 3, seed=0, epoch=0, no_duplicates=True):
        texts = [anchors[row] for row in batch] + [positives[row] for row in batch]
        assert len(texts) == len(set(texts))


def test_biases_and_layer_norms_get_no_weight_decay() -> None:
    model = torch.nn.ModuleDict(
        {"dense": torch.nn.Linear(2, 2), "LayerNorm": torch.nn.LayerNorm(2)}
    )
    optimizer = make_optimizer(model, 1e-3, weight_decay=0.01)
    decayed, plain = optimizer.param_groups
    assert decayed["weight_decay"] == 0.01 and len(decayed["params"]) == 1
    assert plain["weight_decay"] == 0.0 and len(plain["params"]) == 3


def test_linear_warm_up_then_linear_decay() -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = warmup_linear(optimizer, warmup_steps=2, steps=6)
    rates = []
    for _ in range(6):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([0.0, 0.5, 1.0, 0.75, 0.5, 0.25])
