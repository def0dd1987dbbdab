"""Pooling: mean / max / cls as before, and learned attention that survives save and load."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from semsearch.errors import SemsearchError
from semsearch.models import BiEncoder, Pooling

# Two sentences of 3 and 2 tokens; the padded position holds a value that must not leak.
TOKENS = torch.tensor(
    [
        [[1.0, 2.0], [3.0, 0.0], [5.0, 4.0]],
        [[2.0, 2.0], [0.0, 6.0], [99.0, 99.0]],
    ]
)
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("mean", [[3.0, 2.0], [1.0, 4.0]]),
        ("max", [[5.0, 4.0], [2.0, 6.0]]),
        ("cls", [[1.0, 2.0], [2.0, 2.0]]),
    ],
)
def test_fixed_modes_pool_the_real_tokens(mode, expected) -> None:
    assert Pooling(mode)(TOKENS, MASK).tolist() == expected


def test_untrained_attention_is_mean_pooling() -> None:
    attention = Pooling("attention", dimension=2)
    torch.testing.assert_close(attention(TOKENS, MASK), Pooling("mean")(TOKENS, MASK))


def test_attention_weights_follow_the_scorer_and_skip_padding() -> None:
    attention = Pooling("attention", dimension=2)
    with torch.no_grad():
        attention.scorer.weight.copy_(torch.tensor([[1.0, 0.0]]))  # score = first feature
    weights = torch.softmax(torch.tensor([2.0, 0.0]), dim=0)  # padding (99) gets no weight
    expected = weights[0] * TOKENS[1, 0] + weights[1] * TOKENS[1, 1]
    torch.testing.assert_close(attention(TOKENS, MASK)[1], expected)


def test_attention_scorer_learns() -> None:
    attention = Pooling("attention", dimension=2)
    attention(TOKENS, MASK)[:, 0].sum().backward()
    assert attention.scorer.weight.grad.abs().sum() > 0


def test_attention_needs_the_hidden_size_and_modes_are_checked() -> None:
    with pytest.raises(ValueError, match="hidden size"):
        Pooling("attention")
    with pytest.raises(ValueError, match="pooling must be one of"):
        Pooling("sum")  # type: ignore[arg-type]


def test_attention_pooling_round_trips_through_a_model_folder(tiny_model_dir, tmp_path) -> None:
    encoder = BiEncoder.load(str(tiny_model_dir), pooling="attention", device="cpu")
    torch.manual_seed(1)
    torch.nn.init.normal_(encoder.pooling.scorer.weight)
    encoder.save(tmp_path)
    config = json.loads((tmp_path / "1_Pooling" / "config.json").read_text())
    assert config["pooling_mode_attention"] is True and not config["pooling_mode_mean_tokens"]
    assert (tmp_path / "1_Pooling" / "attention.safetensors").is_file()

    loaded = BiEncoder.load(str(tmp_path), device="cpu")
    texts = ["A man is playing a guitar.", "The cat sleeps."]
    assert loaded.pooling.mode == "attention"
    np.testing.assert_allclose(loaded.encode(texts), encoder.encode(texts), atol=1e-6)
    mean = BiEncoder.load(str(tmp_path), pooling="mean", device="cpu")
    assert loaded.fingerprint != mean.fingerprint  # the scorer is part of what made the vectors


def test_a_folder_missing_its_scorer_is_a_clear_error(tiny_model_dir, tmp_path) -> None:
    BiEncoder.load(str(tiny_model_dir), pooling="attention", device="cpu").save(tmp_path)
    (tmp_path / "1_Pooling" / "attention.safetensors").unlink()
    with pytest.raises(SemsearchError, match="holds no attention.safetensors"):
        BiEncoder.load(str(tmp_path), device="cpu")


def test_mean_pooled_folders_are_written_as_before(tiny_model_dir, tmp_path) -> None:
    BiEncoder.load(str(tiny_model_dir), device="cpu").save(tmp_path)
    config = json.loads((tmp_path / "1_Pooling" / "config.json").read_text())
    assert "pooling_mode_attention" not in config and config["pooling_mode_mean_tokens"]
    assert not (tmp_path / "1_Pooling" / "attention.safetensors").exists()
