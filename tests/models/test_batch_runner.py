"""A device that runs out of memory mid-encode: batches are halved (one warning), later ones
kept to the size that fitted, the vectors unchanged; a single row that does not fit is one
clear error. The out-of-memory is injected into the tiny real model's forward pass."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from semsearch.errors import SemsearchError

TEXTS = [f"text number {i} " + "word " * (i % 7) for i in range(64)]


class TightMemory:
    """The model, failing like a full GPU on any batch of more than `rows` rows; every call's
    batch size is recorded."""

    def __init__(self, model, rows: int) -> None:
        self.model, self.rows, self.calls = model, rows, []
        self.config, self.dtype = model.config, model.dtype

    def __call__(self, input_ids, **kwargs):
        self.calls.append(int(input_ids.shape[0]))
        if input_ids.shape[0] > self.rows:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return self.model(input_ids=input_ids, **kwargs)


@pytest.mark.parametrize("packing", [False, True])
def test_batches_that_do_not_fit_are_halved_and_later_ones_kept_small(
    tiny_encoder, monkeypatch, caplog, packing
) -> None:
    expected = tiny_encoder.encode(TEXTS, batch_size=16, packing=packing, max_batch_tokens=16 * 64)
    fits = 1 if packing else 5  # packed: a handful of rows hold all 64 short texts
    tight = TightMemory(tiny_encoder.transformer, rows=fits)
    monkeypatch.setattr(tiny_encoder, "_inference_transformer", lambda precision: tight)
    with caplog.at_level(logging.WARNING, logger="semsearch.models.batch_runner"):
        vectors = tiny_encoder.encode(
            TEXTS, batch_size=16, packing=packing, max_batch_tokens=16 * 64
        )
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and "ran out of memory" in warnings[0]
    failed = [rows for rows in tight.calls if rows > fits]
    assert len(failed) <= 2  # the first batch, and perhaps its first half: never again after
    assert max(tight.calls[tight.calls.index(failed[-1]) + 1 :]) <= fits


def test_a_single_row_that_does_not_fit_is_one_clear_error(tiny_encoder, monkeypatch) -> None:
    tight = TightMemory(tiny_encoder.transformer, rows=0)
    monkeypatch.setattr(tiny_encoder, "_inference_transformer", lambda precision: tight)
    with pytest.raises(
        SemsearchError, match="out of memory on a single batch row: use --device cpu"
    ):
        tiny_encoder.encode(TEXTS[:4], batch_size=4)
