"""Encoding on a CUDA GPU (marked `gpu`): bf16 vectors, padded and packed, against the fp32
CPU ones of the real default model."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.models import BiEncoder

TEXTS = [
    f"{word} library for {topic}"
    for word in ("A fast", "A small", "Another")
    for topic in ("JSON", "images", "archives", "HTTP requests", "dates")
] * 40
TEXTS += [" ".join(["a long package description that goes on"] * 40)] * 20


@pytest.mark.gpu
@pytest.mark.parametrize("packing", [False, True])
def test_gpu_vectors_stay_within_the_cosine_goal_of_the_cpu_ones(
    default_encoder, reference_model_dir, packing
) -> None:
    reference = default_encoder.encode(TEXTS)
    gpu = BiEncoder.load(reference_model_dir, device="cuda")
    vectors = gpu.encode(TEXTS, packing=packing)
    cosines = (reference * vectors).sum(axis=1)
    assert cosines.mean() >= 0.999 and cosines.min() >= 0.995
    assert np.isfinite(vectors).all()
