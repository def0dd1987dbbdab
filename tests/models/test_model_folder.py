"""Resolving model names to folders, and fingerprinting their weights."""

from __future__ import annotations

import pytest

from semsearch.errors import SemsearchError
from semsearch.models.model_folder import DEFAULT_MODEL_SHA256, resolve_model, weights_fingerprint


def test_default_model_is_verified_and_declares_sentence_transformers_config() -> None:
    folder = resolve_model("default")
    assert weights_fingerprint(folder.path) == DEFAULT_MODEL_SHA256
    assert (folder.pooling, folder.normalize, folder.max_length) == ("mean", True, 256)


def test_plain_hugging_face_folder_has_no_declared_pooling(tiny_model_dir) -> None:
    folder = resolve_model(str(tiny_model_dir))
    assert folder.pooling is None and folder.normalize is None
    assert folder.name == str(tiny_model_dir.resolve())


def test_fingerprint_changes_with_the_weights(tiny_model_dir, tmp_path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    data = bytearray((tiny_model_dir / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (copy / "model.safetensors").write_bytes(bytes(data))
    assert weights_fingerprint(copy) != weights_fingerprint(tiny_model_dir)


def test_folder_without_config_is_refused(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="config.json"):
        resolve_model(str(tmp_path))


def test_file_instead_of_folder_is_refused(tmp_path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(SemsearchError, match="not a folder"):
        resolve_model(str(tmp_path / "weights.bin"))


def test_unreachable_hub_name_says_what_to_do() -> None:
    with pytest.raises(SemsearchError, match="could not be fetched from the hub"):
        resolve_model("no-such-owner/no-such-model-semsearch-test")
