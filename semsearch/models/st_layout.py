"""Writing a model folder in sentence-transformers' layout, so that both libraries load it.

Why its own module: the transformer encoder and the word-vector encoder write the same
files around different networks (`modules.json`, a pooling folder, an optional normalise
module), and each file is written to a temporary name and renamed, so an interrupted save
never leaves a folder that half loads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from semsearch.models.model_folder import ATTENTION_WEIGHTS
from semsearch.models.prompts import ST_CONFIG

ST = "sentence_transformers.models."


def module_entry(index: int, path: str, kind: str) -> dict:
    """One `modules.json` entry: module `index` of class `kind`, its files under `path`."""
    return {"idx": index, "name": str(index), "path": path, "type": ST + kind}


def pooling_config(dimension: int, mode: str) -> dict:
    """The pooling module's `config.json`. sentence-transformers has no attention pooling, so
    that mode gets a key of its own: sentence-transformers refuses the folder instead of
    silently pooling another way, and semsearch reads the key and the scorer's weights."""
    config = {
        "word_embedding_dimension": dimension,
        "pooling_mode_cls_token": mode == "cls",
        "pooling_mode_mean_tokens": mode == "mean",
        "pooling_mode_max_tokens": mode == "max",
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    if mode == "attention":
        config["pooling_mode_attention"] = True
    return config


def write_tail(encoder: Any, folder: Path, modules: list[dict], dimension: int) -> None:
    """After the network's own modules: pooling (with an attention scorer's weights), an
    optional normalise module, the prompts (`config_sentence_transformers.json`), then
    `modules.json`, written last so that a folder missing
    it is plainly incomplete."""
    path = f"{len(modules)}_Pooling"
    modules.append(module_entry(len(modules), path, "Pooling"))
    write_json(folder / path / "config.json", pooling_config(dimension, encoder.pooling.mode))
    if encoder.pooling.mode == "attention":
        write_weights(folder / path / ATTENTION_WEIGHTS, encoder.pooling.state_dict())
    if encoder.normalize:
        path = f"{len(modules)}_Normalize"
        modules.append(module_entry(len(modules), path, "Normalize"))
        (folder / path).mkdir(parents=True, exist_ok=True)
    prompts = getattr(encoder, "prompts", None)
    if prompts is not None and (prompts.query or prompts.document):  # kept for both libraries
        named = {"query": prompts.query, "document": prompts.document}
        write_json(folder / ST_CONFIG, {"prompts": named})
    write_json(folder / "modules.json", modules)


def write_transformer_folder(encoder: Any, folder: Path) -> None:
    """A `BiEncoder` over a Hugging Face transformer: its weights (safetensors), tokenizer,
    pooling and `sentence_bert_config.json`."""
    encoder.transformer.save_pretrained(folder, safe_serialization=True)
    encoder.tokenizer.save_pretrained(folder)
    write_json(
        folder / "sentence_bert_config.json",
        {"max_seq_length": encoder.max_length, "do_lower_case": encoder.do_lower_case},
    )
    write_tail(encoder, folder, [module_entry(0, "", "Transformer")], encoder.dimension)


def write_weights(path: Path, weights: dict[str, torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    save_file({key: value.detach().cpu().contiguous() for key, value in weights.items()}, temporary)
    os.replace(temporary, path)


def write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
