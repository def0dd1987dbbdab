"""Telling a bi-encoder folder from a cross-encoder one, and refusing one for the other."""

from __future__ import annotations

import pytest
import torch
from tiny_cross import make_tiny_cross_encoder
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from semsearch.errors import SemsearchError
from semsearch.models import BiEncoder
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.models.model_folder import model_kind, resolve_model


@pytest.fixture(scope="module")
def cross_dir(tiny_model_dir, tmp_path_factory):
    return make_tiny_cross_encoder(tiny_model_dir, tmp_path_factory.mktemp("cross"))


def test_kinds_of_folders(tiny_model_dir, cross_dir, tmp_path) -> None:
    assert model_kind(resolve_model("default").path) == "bi-encoder"
    assert model_kind(tiny_model_dir) == "bi-encoder"  # a plain transformer
    assert model_kind(cross_dir) == "cross-encoder"
    # A sequence classifier saved by another tool, without cross_encoder.json.
    config = BertConfig(
        vocab_size=100,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=8,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(tmp_path / "other")
    assert model_kind(tmp_path / "other") == "cross-encoder"
    # sentence-transformers 5+ saves a cross-encoder with modules.json, and says what it is.
    (tmp_path / "other" / "modules.json").write_text("[]")
    assert model_kind(tmp_path / "other") == "bi-encoder"
    st_config = '{"model_type": "CrossEncoder"}'
    (tmp_path / "other" / "config_sentence_transformers.json").write_text(st_config)
    assert model_kind(tmp_path / "other") == "cross-encoder"


def test_a_cross_encoder_is_refused_as_a_bi_encoder_in_one_line(cross_dir) -> None:
    with pytest.raises(SemsearchError, match="is a cross-encoder") as error:
        BiEncoder.load(str(cross_dir), device="cpu")
    assert "\n" not in str(error.value) and "--rerank" in str(error.value)


def test_a_bi_encoder_is_refused_as_a_cross_encoder_in_one_line(tiny_model_dir) -> None:
    for name in (str(tiny_model_dir), "default"):
        with pytest.raises(SemsearchError, match="is a bi-encoder") as error:
            CrossEncoder.load(name, device="cpu")
        assert "\n" not in str(error.value) and "--cross-encoder" in str(error.value)


def test_a_new_head_needs_a_bi_encoder_to_start_from(cross_dir) -> None:
    with pytest.raises(SemsearchError, match="is a cross-encoder"):
        CrossEncoder.from_encoder(str(cross_dir), device="cpu")


def test_a_foreign_sequence_classifier_loads_as_a_cross_encoder(tiny_model_dir, tmp_path) -> None:
    torch.manual_seed(0)
    config = BertConfig.from_pretrained(tiny_model_dir, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(tmp_path / "foreign")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "foreign")
    model = CrossEncoder.load(str(tmp_path / "foreign"), device="cpu")
    assert model.num_labels == 1 and model.predict([("a", "b")]).shape == (1,)
