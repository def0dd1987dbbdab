"""Weight-space interpolation: the written model's weights lie where the weight says, it
loads and encodes, and bad input is refused with nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from semsearch.errors import SemsearchError
from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.interpolate import RECORD_FILE, interpolate_models


@pytest.fixture()
def tuned_dir(tmp_path, tiny_model_dir):
    """The tiny model with every weight moved: a stand-in for a fine-tuned copy."""
    encoder = BiEncoder.load(str(tiny_model_dir), device="cpu")
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in encoder.transformer.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    folder = tmp_path / "tuned"
    encoder.save(folder)
    return folder


def _weights(folder) -> dict[str, torch.Tensor]:
    return {
        name: tensor.clone()
        for name, tensor in BiEncoder.load(str(folder), device="cpu")
        .transformer.state_dict()
        .items()
    }


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_weights_lie_on_the_line_between_the_models(
    tmp_path, tiny_model_dir, tuned_dir, weight
) -> None:
    output = tmp_path / f"mixed-{weight}"
    interpolate_models(str(tiny_model_dir), str(tuned_dir), weight, output)
    base, tuned, mixed = _weights(tiny_model_dir), _weights(tuned_dir), _weights(output)
    for name, tensor in mixed.items():
        if tensor.is_floating_point():
            torch.testing.assert_close(
                tensor, base[name] + weight * (tuned[name] - base[name]), rtol=0, atol=1e-6
            )
    assert json.loads((output / RECORD_FILE).read_text())["weight"] == weight
    vectors = BiEncoder.load(str(output), device="cpu").encode(["a small test", "another one"])
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all()


def test_bad_input_writes_nothing(tmp_path, tiny_model_dir, tuned_dir) -> None:
    output = tmp_path / "out"
    with pytest.raises(SemsearchError, match="between 0"):
        interpolate_models(str(tiny_model_dir), str(tuned_dir), 1.5, output)
    other = tmp_path / "other"
    BertModel(
        BertConfig(
            vocab_size=30522,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
        )
    ).save_pretrained(other)
    BiEncoder.load(str(tiny_model_dir), device="cpu").tokenizer.save_pretrained(other)
    with pytest.raises(SemsearchError, match="differ in shape"):
        interpolate_models(str(tiny_model_dir), str(other), 0.5, output)
    assert not output.exists() and not list(tmp_path.glob(".out.partial-*"))
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    with pytest.raises(SemsearchError, match="not an empty folder"):
        interpolate_models(str(tiny_model_dir), str(tuned_dir), 0.5, output)
    assert [p.name for p in output.iterdir()] == ["keep.txt"]
