"""Transformer model folders as bi-encoders: transformer, tokenizer, pooling, limit, fingerprint.

Why apart from `BiEncoder.load`: a folder is read in two ways, a Hugging Face transformer
(here) or word vectors (`word_model.load_word_encoder`); `load` checks the arguments, picks
the reader and then the runtime. Explicit arguments win over what the folder declares.
"""

from __future__ import annotations

from typing import Any

from safetensors.torch import load_file
from transformers import AutoModel

from semsearch.models.loading import load_pretrained, model_max_length
from semsearch.models.model_folder import ModelFolder, weights_fingerprint
from semsearch.models.pooling import Pooling, PoolingMode
from semsearch.models.prompts import Prompts
from semsearch.models.torch_device import resolve_device


def load_transformer_encoder(
    cls: Any,
    folder: ModelFolder,
    name: str,
    pooling: PoolingMode | None,
    normalize: bool | None,
    max_length: int | None,
    device: str,
    prompts: Prompts,
) -> Any:
    """`cls` (a `BiEncoder`) over the folder's transformer, in eval mode on `device`, its
    fingerprint over the weights (and a trained pooling scorer where it is used)."""
    transformer, tokenizer = load_pretrained(folder, AutoModel)
    model_limit = model_max_length(transformer, tokenizer)
    pooling_module = _load_pooling(folder, pooling, transformer.config.hidden_size)
    encoder = cls(
        transformer=transformer,
        tokenizer=tokenizer,
        pooling=pooling_module,
        normalize=normalize if normalize is not None else folder.normalize is not False,
        max_length=min(max_length or folder.max_length or model_limit, model_limit),
        name=name,
        do_lower_case=folder.do_lower_case,
        prompts=prompts,
    )
    scorer = (folder.pooling_weights,) if _uses_saved_scorer(folder, pooling_module) else ()
    encoder._fingerprint = weights_fingerprint(folder.path, extra=scorer)
    encoder.eval()
    return encoder.to(resolve_device(device))


def _load_pooling(folder: ModelFolder, mode: PoolingMode | None, dimension: int) -> Pooling:
    """The folder's pooling (with its trained scorer), unless the caller asks for another mode."""
    pooling = Pooling(mode or folder.pooling or "mean", dimension=dimension)
    if _uses_saved_scorer(folder, pooling):
        pooling.load_state_dict(load_file(folder.pooling_weights))
    return pooling


def _uses_saved_scorer(folder: ModelFolder, pooling: Pooling) -> bool:
    return pooling.scorer is not None and folder.pooling_weights is not None
