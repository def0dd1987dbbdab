"""The cross-encoder: pair encoding, batched prediction in input order, save and load."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tiny_cross import make_tiny_cross_encoder
from transformers import AutoModelForSequenceClassification

from semsearch.models.cross_encoder import CrossEncoder

PAIRS = [
    ("A man is playing a guitar.", "A person plays an acoustic guitar on stage."),
    ("The cat sleeps.", "Stock markets fell sharply on Monday, and kept falling all week long."),
    ("How do I compress a folder on Linux?", "Create a tar.gz archive of a directory."),
    ("Bake it.", "Bake the cake for forty minutes."),
    ("A library for parsing JSON quickly.", "Fast JSON decoding for Python programs."),
]


@pytest.fixture(scope="module")
def cross_dir(tiny_model_dir, tmp_path_factory):
    return make_tiny_cross_encoder(tiny_model_dir, tmp_path_factory.mktemp("cross"))


@pytest.fixture()
def cross(cross_dir) -> CrossEncoder:
    return CrossEncoder.load(str(cross_dir), device="cpu")


def test_a_pair_is_read_as_cls_a_sep_b_sep_with_segment_ids(cross) -> None:
    ids, segments = cross.tokenize([("a cat", "a dog")])
    assert cross.tokenizer.decode(ids[0]) == "[CLS] a cat [SEP] a dog [SEP]"
    assert segments[0] == [0, 0, 0, 0, 1, 1, 1]


def test_long_pairs_are_truncated_at_max_length(cross) -> None:
    cross.max_length = 12
    ids, _ = cross.tokenize([("word " * 50, "other " * 50)])
    assert len(ids[0]) == 12 and cross.tokenizer.decode(ids[0]).count("[SEP]") == 2


def test_predict_keeps_input_order_whatever_the_batching(cross) -> None:
    together = cross.predict(PAIRS, batch_size=2)
    alone = np.array([cross.predict([pair], batch_size=1)[0] for pair in PAIRS])
    assert together.shape == (len(PAIRS),) and np.all((together > 0) & (together < 1))
    np.testing.assert_allclose(together, alone, atol=1e-5)
    logits = cross.predict(PAIRS, activation=False)
    np.testing.assert_allclose(1 / (1 + np.exp(-logits)), together, atol=1e-6)


def test_predict_wants_a_list_of_pairs(cross) -> None:
    with pytest.raises(TypeError, match="list of"):
        cross.predict(PAIRS[0])  # type: ignore[arg-type]
    assert cross.predict([]).shape == (0,)


def test_save_and_load_give_the_same_scores_and_a_standard_folder(cross, tmp_path) -> None:
    cross.save(tmp_path / "copy")
    again = CrossEncoder.load(str(tmp_path / "copy"), device="cpu")
    np.testing.assert_allclose(again.predict(PAIRS), cross.predict(PAIRS), atol=1e-6)
    settings = json.loads((tmp_path / "copy" / "cross_encoder.json").read_text())
    assert settings["num_labels"] == 1 and settings["max_length"] == cross.max_length
    # The standard layout: transformers alone rebuilds the same classifier.
    plain = AutoModelForSequenceClassification.from_pretrained(tmp_path / "copy").eval()
    input_ids, mask, segments = cross.features(PAIRS)
    with torch.inference_mode():
        logits = plain(input_ids=input_ids, attention_mask=mask, token_type_ids=segments).logits
    np.testing.assert_allclose(
        logits[:, 0].numpy(), cross.predict(PAIRS, activation=False), atol=1e-5
    )


def test_several_labels_give_class_probabilities_and_keep_their_names(
    tiny_model_dir, tmp_path
) -> None:
    torch.manual_seed(0)
    names = ["contradiction", "entailment", "neutral"]
    model = CrossEncoder.from_encoder(str(tiny_model_dir), 3, label_names=names, device="cpu")
    probabilities = model.predict(PAIRS)
    assert probabilities.shape == (len(PAIRS), 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-6)
    model.save(tmp_path / "nli")
    again = CrossEncoder.load(str(tmp_path / "nli"), device="cpu")
    assert again.label_names == names and again.model.config.id2label[1] == "entailment"
    np.testing.assert_allclose(again.predict(PAIRS), probabilities, atol=1e-6)


def test_a_new_head_starts_from_the_bi_encoders_transformer(tiny_model_dir) -> None:
    model = CrossEncoder.from_encoder(str(tiny_model_dir), device="cpu")
    bert = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir).bert
    embedding = model.model.base_model.embeddings.word_embeddings.weight
    assert torch.equal(embedding, bert.embeddings.word_embeddings.weight)
    assert model.num_labels == 1 and model.activation == "sigmoid"
