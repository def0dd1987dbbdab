"""Word-vector model folders: sentence-transformers' layout, the same vectors in both
libraries, trainable through the objectives, and bad folders refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from models.word_support import TEXTS, tiny_vectors_file

from semsearch.errors import SemsearchError
from semsearch.losses import build_loss
from semsearch.models import BiEncoder
from semsearch.models.word_encoder import WordLayerConfig, WordTokenizer
from semsearch.models.word_model import WordModelOptions, make_word_model


def _model(tmp_path, layer: str = "none", pooling: str = "mean", **options):
    vectors = tiny_vectors_file(tmp_path)
    config = WordLayerConfig(layer, hidden=4)  # type: ignore[arg-type]
    folder = tmp_path / f"model-{layer}"
    make_word_model(vectors, folder, WordModelOptions(layer=config, pooling=pooling, **options))
    return folder


def test_the_tokenizer_drops_unknown_and_stop_words() -> None:
    tokenizer = WordTokenizer(["<pad>", "cat", "mat"], stop_words=["the"])
    assert tokenizer.token_ids("The CAT, on the mat!") == [1, 2]
    assert tokenizer(["nothing known here"])["input_ids"] == [[0]]


def test_averaged_vectors_are_the_mean_of_the_word_vectors(tmp_path) -> None:
    encoder = BiEncoder.load(str(_model(tmp_path)), device="cpu")
    table = encoder.transformer.embeddings.weight.detach().numpy()
    index = encoder.tokenizer.index
    expected = table[[index["cat"], index["dog"]]].mean(axis=0)
    np.testing.assert_allclose(encoder.encode(["cat dog"])[0], expected, rtol=1e-6)
    assert encoder.dimension == 8 and not encoder.normalize


@pytest.mark.default_runtime
def test_a_word_model_runs_torch_by_default_without_a_warning(tmp_path, caplog) -> None:
    """There is no OpenVINO export of a word model: `auto` means torch, with nothing to say."""
    with caplog.at_level("WARNING"):
        encoder = BiEncoder.load(str(_model(tmp_path)), device="cpu")
    assert encoder.runtime == "torch" and caplog.records == []


@pytest.mark.parametrize(("layer", "pooling"), [("none", "max"), ("lstm", "max"), ("cnn", "mean")])
def test_sentence_transformers_loads_the_folder_to_the_same_vectors(
    tmp_path, layer, pooling
) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = _model(tmp_path, layer, pooling, normalize=layer == "cnn")
    modules = json.loads((folder / "modules.json").read_text())
    assert modules[0]["type"] == "sentence_transformers.models.WordEmbeddings"
    ours = BiEncoder.load(str(folder), device="cpu").encode(TEXTS)
    theirs = sentence_transformers.SentenceTransformer(str(folder), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_a_trained_lstm_saves_and_loads_with_a_new_fingerprint(tmp_path) -> None:
    folder = _model(tmp_path, "lstm")
    encoder = BiEncoder.load(str(folder), device="cpu")
    before, fingerprint = encoder.encode(TEXTS), encoder.fingerprint
    loss = build_loss("malstm", encoder)
    optimiser = torch.optim.AdamW([p for p in loss.parameters() if p.requires_grad], lr=1e-2)
    columns, labels = loss.make_batch(
        {"sentence1": TEXTS[:2], "sentence2": TEXTS[2:], "score": [1.0, 0.0]}, [0, 1]
    )
    loss(columns, labels).backward()
    assert encoder.transformer.embeddings.weight.grad is None  # word vectors stay frozen
    optimiser.step()
    encoder.save(tmp_path / "trained")
    reloaded = BiEncoder.load(str(tmp_path / "trained"), device="cpu")
    np.testing.assert_allclose(reloaded.encode(TEXTS), encoder.encode(TEXTS), rtol=1e-5)
    assert not np.allclose(reloaded.encode(TEXTS), before)
    assert reloaded.fingerprint != fingerprint


def test_bad_options_and_folders_are_one_line(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="unknown pooling 'attention' for a word-vector model"):
        _model(tmp_path, pooling="attention")
    with pytest.raises(SemsearchError, match="kernel sizes must be odd"):
        make_word_model(
            tiny_vectors_file(tmp_path),
            tmp_path / "cnn",
            WordModelOptions(layer=WordLayerConfig("cnn", 4, kernel_sizes=(2,))),
        )
    folder = _model(tmp_path, "lstm")
    with pytest.raises(SemsearchError, match="word-vector model: it is not quantised"):
        BiEncoder.load(str(folder), device="cpu", quantization="int8")
    (folder / "1_LSTM" / "model.safetensors").unlink()
    with pytest.raises(SemsearchError, match="no weights at .*incomplete"):
        BiEncoder.load(str(folder), device="cpu")
