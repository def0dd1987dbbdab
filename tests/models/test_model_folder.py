"""Resolving model names to folders, fingerprinting their weights, refusing broken folders in one line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from semsearch.errors import SemsearchError
from semsearch.models import BiEncoder, EncoderSpec
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.models.model_folder import (
    DEFAULT_MODEL_SHA256,
    folder_spec,
    looks_like_path,
    resolve_model,
    weights_fingerprint,
)


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


@pytest.mark.parametrize(
    "name", ["./models/mine", "/tmp/no-such-semsearch-model", "~/nope", "a/b/c"]
)
def test_a_missing_path_is_named_as_a_path_not_sent_to_the_hub(name: str) -> None:
    with pytest.raises(SemsearchError, match=f"^no model folder at {re.escape(name)}: "):
        resolve_model(name)


def test_only_hub_shaped_names_look_like_hub_names() -> None:
    assert not looks_like_path("sentence-transformers/all-MiniLM-L6-v2")
    assert not looks_like_path("bert-base-uncased")
    assert all(map(looks_like_path, ["../m", "C:\\models\\m", "C:/m", "org/name/extra"]))


def test_an_index_never_downloads_its_model(tmp_path) -> None:
    spec = EncoderSpec("no-such-owner/no-such-model-semsearch-test", "", "mean", True, 16, 32)
    with pytest.raises(SemsearchError, match="not in the local Hugging Face cache.*hf download"):
        BiEncoder.for_index(spec, device="cpu")


def _copy(tiny_model_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    return folder


def test_an_unknown_model_type_is_one_line(tiny_model_dir, tmp_path) -> None:
    folder = _copy(tiny_model_dir, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "nosuchmodel"}))
    with pytest.raises(SemsearchError, match="model_type 'nosuchmodel'.*upgrade transformers"):
        BiEncoder.load(str(folder), device="cpu")
    with pytest.raises(SemsearchError, match="model_type 'nosuchmodel'"):
        CrossEncoder.from_encoder(str(folder), device="cpu")


@pytest.mark.parametrize("module_path", ["../elsewhere", "/etc", "sub/../../elsewhere", "C:\\x"])
def test_a_module_path_outside_the_folder_is_refused(tiny_model_dir, tmp_path, module_path) -> None:
    folder = _copy(tiny_model_dir, tmp_path)
    module = {
        "idx": 0,
        "name": "0",
        "path": module_path,
        "type": "sentence_transformers.models.Pooling",
    }
    (folder / "modules.json").write_text(json.dumps([module]))
    with pytest.raises(SemsearchError, match="outside the model folder"):
        resolve_model(str(folder))


def test_corrupt_weights_are_one_line_naming_the_folder(tiny_model_dir, tmp_path) -> None:
    folder = _copy(tiny_model_dir, tmp_path)
    (folder / "model.safetensors").write_bytes(b"not safetensors at all")
    with pytest.raises(
        SemsearchError, match=f"^cannot load the model in {re.escape(str(folder))}: "
    ):
        BiEncoder.load(str(folder), device="cpu")


def test_missing_tokenizer_files_are_refused(tiny_model_dir, tmp_path) -> None:
    folder = _copy(tiny_model_dir, tmp_path)
    for file in folder.iterdir():
        if file.name not in ("config.json", "model.safetensors"):
            file.unlink()
    with pytest.raises(SemsearchError, match="tokenizer files .* are missing"):
        BiEncoder.load(str(folder), device="cpu")


@pytest.mark.parametrize("model", ["default", "tiny", "prompted"])
def test_the_spec_from_the_folders_files_is_the_loaded_encoders(
    model, tiny_model_dir, prompted_model_dir
) -> None:
    name = {"tiny": str(tiny_model_dir), "prompted": str(prompted_model_dir)}.get(model, model)
    folder = resolve_model(name)
    loaded = BiEncoder.load(name, device="cpu", runtime="torch")
    assert folder_spec(folder, name, folder.prompts) == loaded.spec
