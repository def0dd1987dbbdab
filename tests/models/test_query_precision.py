"""The server's query precision: asked for, or measured on the CPU it runs on."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.errors import SemsearchError
from semsearch.models import query_precision
from semsearch.models.query_precision import choose_query_precision


def test_an_explicit_precision_is_kept_and_an_unknown_one_refused(tiny_encoder) -> None:
    assert choose_query_precision(tiny_encoder, "fp32") == "fp32"
    assert choose_query_precision(tiny_encoder, "bf16") == "bf16"
    with pytest.raises(SemsearchError, match="unknown query precision 'fp8'"):
        choose_query_precision(tiny_encoder, "fp8")


def test_auto_keeps_bf16_only_when_it_is_close_and_faster(tiny_encoder, monkeypatch) -> None:
    monkeypatch.setattr(query_precision, "MIN_SPEEDUP", 0.0)
    monkeypatch.setattr(query_precision, "MIN_COSINE", 0.9)
    assert choose_query_precision(tiny_encoder) == "bf16"
    monkeypatch.setattr(query_precision, "MIN_COSINE", 1.0001)  # no bf16 vector is that close
    assert choose_query_precision(tiny_encoder) == "fp32"
    monkeypatch.setattr(query_precision, "MIN_COSINE", 0.9)
    monkeypatch.setattr(query_precision, "MIN_SPEEDUP", 1000.0)  # nor that much faster
    assert choose_query_precision(tiny_encoder) == "fp32"


def test_bf16_query_vectors_stay_close_to_fp32(tiny_encoder, sentences) -> None:
    full = tiny_encoder.encode(sentences, precision="fp32")
    half = tiny_encoder.encode(sentences, precision="bf16")
    cosine = np.sum(full * half, axis=1) / (
        np.linalg.norm(full, axis=1) * np.linalg.norm(half, axis=1)
    )
    assert cosine.min() > 0.99
