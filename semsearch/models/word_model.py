"""Word-vector model folders in sentence-transformers' module layout: made, saved and loaded.

A folder holds `modules.json` and one subfolder per module: `0_WordEmbeddings` (the
vectors, `wordembedding_config.json`, the whitespace tokenizer's vocabulary), then
optionally `1_LSTM` or `1_CNN`, then `Pooling` and optionally `Normalize`. Both
`sentence_transformers.SentenceTransformer(folder)` and `BiEncoder.load(folder)` read
it, so such a model trains with `semsearch train --model FOLDER` and indexes with
`semsearch build --model FOLDER` like any other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from safetensors.torch import load_file

from semsearch.errors import SemsearchError, one_line
from semsearch.models.model_folder import ModelFolder, read_json
from semsearch.models.pooling import Pooling
from semsearch.models.st_layout import ST, module_entry, write_json, write_tail, write_weights
from semsearch.models.torch_device import resolve_device
from semsearch.models.word_encoder import WordLayerConfig, WordNetwork, WordTokenizer
from semsearch.models.word_vectors import read_word_vectors

TOKENIZER_CLASS = ST + "tokenizer.WhitespaceTokenizer"
EMBEDDINGS_DIR = "0_WordEmbeddings"
EMBEDDINGS_CONFIG = "wordembedding_config.json"
TOKENIZER_CONFIG = "whitespacetokenizer_config.json"
WEIGHTS = "model.safetensors"
LAYER_FILES = {"lstm": ("LSTM", "lstm_config.json"), "cnn": ("CNN", "cnn_config.json")}
WORD_POOLINGS = ("mean", "max", "cls")
DEFAULT_MAX_LENGTH = 256


@dataclass(frozen=True)
class WordModelOptions:
    """How `make_word_model` builds a folder from a word-vector file.

    Args:
        layer: the layer over the vectors (`none` for averaged word vectors).
        pooling: `mean`, `max` or `cls` (the first word's vector).
        normalize: L2-normalise the sentence vectors.
        dimension: the vectors' expected dimension (None: whatever the file has).
        stop_words: words the tokenizer drops.
        update_embeddings: train the word vectors too (by default they stay frozen).
        seed: seeds the layer's initial weights.
    """

    layer: WordLayerConfig = WordLayerConfig()
    pooling: str = "mean"
    normalize: bool = False
    dimension: int | None = None
    stop_words: Sequence[str] = ()
    update_embeddings: bool = False
    max_length: int = DEFAULT_MAX_LENGTH
    seed: int = 0


def make_word_model(
    vectors_file: str | Path, folder: str | Path, options: WordModelOptions
) -> Path:
    """Write a new (untrained) word-vector model folder; returns the folder."""
    if options.pooling not in WORD_POOLINGS:
        raise SemsearchError(
            f"unknown pooling {options.pooling!r} for a word-vector model: choose one of "
            f"{', '.join(WORD_POOLINGS)}"
        )
    if options.layer.kind == "cnn" and any(size % 2 == 0 for size in options.layer.kernel_sizes):
        raise SemsearchError("CNN kernel sizes must be odd, so that every word keeps one output")
    vectors = read_word_vectors(vectors_file, options.dimension).with_padding()
    torch.manual_seed(options.seed)
    try:
        network = WordNetwork(
            torch.from_numpy(vectors.vectors), options.layer, options.update_embeddings
        )
    except ValueError as exc:
        raise SemsearchError(str(exc)) from exc
    encoder = SimpleNamespace(  # what `save_word_model` reads of a `BiEncoder`
        transformer=network,
        tokenizer=WordTokenizer(vectors.words, options.stop_words),
        pooling=Pooling(options.pooling),  # type: ignore[arg-type]
        normalize=options.normalize,
        max_length=options.max_length,
    )
    save_word_model(encoder, folder)
    return Path(folder)


def save_word_model(encoder: Any, folder: str | Path) -> None:
    """Write a `BiEncoder` whose transformer is a `WordNetwork` in sentence-transformers' layout."""
    network: WordNetwork = encoder.transformer
    tokenizer: WordTokenizer = encoder.tokenizer
    if encoder.pooling.mode not in WORD_POOLINGS:
        raise SemsearchError(
            f"a word-vector model pools with {', '.join(WORD_POOLINGS)}, not {encoder.pooling.mode}"
        )
    folder = Path(folder)
    modules = [module_entry(0, EMBEDDINGS_DIR, "WordEmbeddings")]
    embeddings = folder / EMBEDDINGS_DIR
    write_json(
        embeddings / EMBEDDINGS_CONFIG,
        {
            "tokenizer_class": TOKENIZER_CLASS,
            "update_embeddings": network.update_embeddings,
            "max_seq_length": encoder.max_length,
        },
    )
    write_json(
        embeddings / TOKENIZER_CONFIG,
        {
            "vocab": tokenizer.vocab,
            "stop_words": sorted(tokenizer.stop_words),
            "do_lower_case": tokenizer.do_lower_case,
        },
    )
    write_weights(embeddings / WEIGHTS, {"emb_layer.weight": network.embeddings.weight})
    layer = network.layer
    if layer.kind != "none":
        name, config_file = LAYER_FILES[layer.kind]
        path = f"{len(modules)}_{name}"
        modules.append(module_entry(len(modules), path, name))
        write_json(folder / path / config_file, _layer_config(network))
        prefix, part = (
            ("encoder.", network.lstm) if layer.kind == "lstm" else ("convs.", network.convs)
        )
        weights = {prefix + key: value for key, value in part.state_dict().items()}  # type: ignore[union-attr]
        write_weights(folder / path / WEIGHTS, weights)
    write_tail(encoder, folder, modules, network.config.hidden_size)


def load_word_model(folder: ModelFolder) -> tuple[WordNetwork, WordTokenizer, int]:
    """The network, tokenizer and maximum length of a word-vector model folder."""
    embeddings = folder.transformer_path
    config = read_json(embeddings / EMBEDDINGS_CONFIG)
    vocabulary = read_json(embeddings / TOKENIZER_CONFIG)
    if not isinstance(config, dict) or not isinstance(vocabulary, dict):
        raise SemsearchError(f"{embeddings} holds malformed word-embedding configuration files")
    if config.get("tokenizer_class", "").rsplit(".", 1)[-1] != "WhitespaceTokenizer":
        raise SemsearchError(
            f"{embeddings} uses tokenizer {config.get('tokenizer_class')!r}: semsearch reads "
            "word-vector models with sentence-transformers' WhitespaceTokenizer only"
        )
    weights = _read_weights(embeddings / WEIGHTS)
    layer, layer_weights = _read_layer(folder.path, int(weights["emb_layer.weight"].shape[1]))
    try:
        tokenizer = WordTokenizer(
            vocabulary.get("vocab", []),
            vocabulary.get("stop_words", ()),
            bool(vocabulary.get("do_lower_case", False)),
        )
        network = WordNetwork(
            weights["emb_layer.weight"], layer, bool(config.get("update_embeddings"))
        )
        if layer.kind == "lstm":
            network.lstm.load_state_dict(_strip(layer_weights, "encoder."))  # type: ignore[union-attr]
        elif layer.kind == "cnn":
            network.convs.load_state_dict(_strip(layer_weights, "convs."))  # type: ignore[union-attr]
    except (KeyError, ValueError, RuntimeError) as exc:
        reason = one_line(exc)
        raise SemsearchError(
            f"cannot load the word-vector model in {folder.path}: {reason}"
        ) from exc
    return network, tokenizer, int(config.get("max_seq_length") or DEFAULT_MAX_LENGTH)


def load_word_encoder(
    cls: Any,
    folder: ModelFolder,
    pooling: str | None,
    normalize: bool | None,
    max_length: int | None,
    device: str,
    quantization: str | None,
) -> Any:
    """`BiEncoder.load` for a word-vector folder: explicit arguments win over its files."""
    if quantization:
        raise SemsearchError(
            f"{folder.name} is a word-vector model: it is not quantised, drop --quantize"
        )
    mode = pooling or folder.pooling or "mean"
    if mode not in WORD_POOLINGS:
        raise SemsearchError(
            f"a word-vector model pools with {', '.join(WORD_POOLINGS)}, not {mode}"
        )
    network, tokenizer, saved_length = load_word_model(folder)
    encoder = cls(
        transformer=network,
        tokenizer=tokenizer,
        pooling=Pooling(mode),  # type: ignore[arg-type]
        normalize=normalize if normalize is not None else folder.normalize is True,
        max_length=max_length or saved_length,
        name=folder.name,
    )
    encoder._fingerprint = word_model_fingerprint(folder.path)
    encoder.eval()
    return encoder.to(resolve_device(device))


def word_model_fingerprint(folder: Path) -> str:
    """sha256 over every module's weights and the vocabulary (a changed word list changes
    every vector, as changed weights do)."""
    files = sorted(folder.glob(f"*/{WEIGHTS}")) + [folder / EMBEDDINGS_DIR / TOKENIZER_CONFIG]
    digest = hashlib.sha256()
    for file in files:
        digest.update(hashlib.sha256(file.read_bytes()).hexdigest().encode())
    return digest.hexdigest()


def _read_layer(folder: Path, width: int) -> tuple[WordLayerConfig, dict[str, torch.Tensor]]:
    """The LSTM or CNN module named in `modules.json` (at most one), with its weights."""
    layer, weights = WordLayerConfig("none"), {}
    for module in read_json(folder / "modules.json"):  # type: ignore[union-attr]
        kind = module.get("type", "").rsplit(".", 1)[-1]
        path = folder / module.get("path", "")
        if kind in ("WordEmbeddings", "Pooling", "Normalize"):
            continue
        if kind not in ("LSTM", "CNN") or layer.kind != "none":
            raise SemsearchError(
                f"{folder} has a {kind} module after its word embeddings: semsearch loads word "
                "embeddings with at most one LSTM or CNN, then pooling"
            )
        config = read_json(path / LAYER_FILES[kind.lower()][1])
        layer = _layer_from_config(kind.lower(), config, width, path)  # type: ignore[arg-type]
        weights = _read_weights(path / WEIGHTS)
    return layer, weights


def _layer_from_config(kind: str, config: dict, width: int, path: Path) -> WordLayerConfig:
    inputs = config.get("word_embedding_dimension", config.get("embedding_dimension"))
    if kind == "cnn":
        inputs = config.get("in_word_embedding_dimension", config.get("in_embedding_dimension"))
    if inputs != width or (kind == "lstm" and not config.get("bidirectional", True)):
        raise SemsearchError(
            f"{path} expects {inputs}-dimensional word vectors (bidirectional for an LSTM) but "
            f"the model's embeddings have {width}: the folder's modules do not fit together"
        )
    if kind == "lstm":
        return WordLayerConfig("lstm", int(config["hidden_dim"]), int(config.get("num_layers", 1)))
    return WordLayerConfig(
        "cnn",
        int(config.get("out_channels", 256)),
        kernel_sizes=tuple(config.get("kernel_sizes", (1, 3, 5))),
    )


def _layer_config(network: WordNetwork) -> dict:
    layer, width = network.layer, network.embedding_dimension
    if layer.kind == "lstm":
        return {
            "word_embedding_dimension": width,
            "hidden_dim": layer.hidden,
            "num_layers": layer.layers,
            "dropout": 0.0,
            "bidirectional": True,
        }
    return {
        "in_word_embedding_dimension": width,
        "out_channels": layer.hidden,
        "kernel_sizes": list(layer.kernel_sizes),
        "stride_sizes": [1] * len(layer.kernel_sizes),
    }


def _strip(weights: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {key.removeprefix(prefix): value for key, value in weights.items()}


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise SemsearchError(f"no weights at {path}: the word-vector model folder is incomplete")
    try:
        return load_file(path)
    except Exception as exc:  # safetensors raises its own error types
        raise SemsearchError(f"cannot read {path}: {exc}") from exc
