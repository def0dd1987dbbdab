"""The adapter on frozen vectors: identity until trained, lowers its loss, saves and loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semsearch.errors import SemsearchError
from semsearch.training import AdapterConfig, VectorAdapter, VectorPairs, train_adapter


def _clusters(seed: int = 0) -> tuple[np.ndarray, VectorPairs]:
    """Vectors in 4 noisy clusters whose centres are close together, and pairs labelled
    1 within a cluster, 0 across: the adapter must pull the clusters apart."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(4, 16)) * 0.3 + 1.0
    vectors = np.repeat(centres, 10, axis=0) + rng.normal(size=(40, 16)) * 0.3
    first, second = rng.integers(0, 40, size=(2, 300))
    labels = (first // 10 == second // 10).astype(np.float32)
    return vectors.astype(np.float32), VectorPairs(first, second, labels)


def test_an_untrained_adapter_only_normalises() -> None:
    vectors = np.random.default_rng(0).normal(size=(5, 8)).astype(np.float32)
    adapted = VectorAdapter(8).transform(vectors)
    expected = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert np.allclose(adapted, expected, atol=1e-6)


@pytest.mark.parametrize("objective", ["contrastive", "online-contrastive", "bce"])
def test_training_lowers_the_loss(tmp_path, objective) -> None:
    vectors, pairs = _clusters()
    config = AdapterConfig(objective=objective, epochs=15, batch_size=32)
    result = train_adapter(vectors, pairs, config, tmp_path / "adapter")
    assert result.loss_after < 0.8 * result.loss_before
    assert (tmp_path / "adapter" / "head").is_dir() == (objective == "bce")


def test_saved_adapter_transforms_like_the_trained_one(tmp_path) -> None:
    vectors, pairs = _clusters()
    torch.manual_seed(0)
    train_adapter(vectors, pairs, AdapterConfig(epochs=3), tmp_path / "a")
    loaded = VectorAdapter.load(tmp_path / "a")
    again = VectorAdapter.load(tmp_path / "a").transform(vectors)
    assert np.array_equal(loaded.transform(vectors), again)
    assert not np.allclose(again, VectorAdapter(16).transform(vectors))  # it did learn something


def test_only_pair_objectives_are_accepted() -> None:
    with pytest.raises(SemsearchError, match="contrastive, online-contrastive, bce, not 'mnr'"):
        AdapterConfig(objective="mnr")
