"""The objective registry and the calling convention every loss shares."""

from __future__ import annotations

import pytest
import torch

from semsearch.errors import SemsearchError
from semsearch.losses import (
    LOSSES,
    OBJECTIVES,
    CosineLoss,
    SoftmaxLoss,
    build_loss,
    loss_class,
    require_columns,
    required_columns,
)

OPTIONS = {"softmax": {"num_labels": 2}}


def test_every_objective_has_a_loss_and_declares_its_columns() -> None:
    assert set(LOSSES) == set(OBJECTIVES)
    assert required_columns("cosine") == ("sentence1", "sentence2", "score")
    assert required_columns("softmax") == ("sentence1", "sentence2", "label")
    assert required_columns("triplet") == ("anchor", "positive", "negative")
    assert required_columns("mnr") == ("anchor", "positive")


@pytest.mark.parametrize("name", OBJECTIVES)
def test_every_objective_takes_the_same_call(tiny_encoder, batch, name) -> None:
    loss = build_loss(name, tiny_encoder, **OPTIONS.get(name, {}))
    columns, labels = loss.make_batch(batch, [0, 1, 4])
    value = loss(columns, labels)
    assert value.shape == () and torch.isfinite(value)
    value.backward()
    assert tiny_encoder.transformer.embeddings.word_embeddings.weight.grad is not None


def test_a_missing_column_is_one_clear_error() -> None:
    with pytest.raises(SemsearchError, match="needs the column\\(s\\) score, but the data has"):
        require_columns("cosine", ["sentence1", "sentence2", "label"])
    assert require_columns("mnr", ["anchor", "positive"]) == ("anchor", "positive")
    assert require_columns("mnr", ["negative", "positive", "anchor"]) == (
        "anchor",
        "positive",
        "negative",
    )


def test_unknown_objectives_and_options_are_user_errors(tiny_encoder) -> None:
    assert loss_class("online_contrastive") is loss_class("online-contrastive")
    with pytest.raises(SemsearchError, match="unknown objective 'cosin'"):
        loss_class("cosin")
    with pytest.raises(SemsearchError, match="objective 'cosine'"):
        build_loss("cosine", tiny_encoder, margin=1.0)
    with pytest.raises(SemsearchError, match="at least 2 labels"):
        build_loss("softmax", tiny_encoder, num_labels=1)


def test_make_batch_cuts_rows_in_column_order_with_typed_labels(batch) -> None:
    columns, labels = SoftmaxLoss.make_batch(batch, [4, 0])
    assert columns == [
        [batch["sentence1"][4], batch["sentence1"][0]],
        [batch["sentence2"][4], batch["sentence2"][0]],
    ]
    assert labels.dtype == torch.long and labels.tolist() == [0, 1]
    _, scores = CosineLoss.make_batch(batch, [0])
    assert scores.dtype == torch.float32 and scores.tolist() == pytest.approx([0.9])


def test_columns_must_be_complete_and_aligned(tiny_encoder) -> None:
    loss = CosineLoss(tiny_encoder)
    with pytest.raises(ValueError, match="2-2 text columns"):
        loss([["a"]], torch.ones(1))
    with pytest.raises(ValueError, match="same number of rows"):
        loss([["a", "b"], ["c"]], torch.ones(2))
    with pytest.raises(ValueError, match="needs labels"):
        loss([["a"], ["b"]])
