"""Loading a model folder's transformer and tokenizer with transformers, failures as one line;
a bi-encoder over them.

Why: transformers reports a broken folder in many ways (a `ValueError` for an unknown
`model_type`, a safetensors error for corrupt weights, an `OSError` for a missing file) and
builds an empty tokenizer, silently, when the tokenizer files are missing. Both encoders
load through `load_pretrained`, so every such folder is refused with one line that names
it and says what to do.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import transformers
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers import utils as hf_utils
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

from semsearch.errors import SemsearchError, one_line
from semsearch.models.model_folder import ModelFolder, read_json, token_limit, weights_fingerprint
from semsearch.models.pooling import Pooling, PoolingMode
from semsearch.models.prompts import Prompts
from semsearch.models.torch_device import resolve_device


class _UnusedLossNotice(logging.Filter):
    """Drops transformers' "`loss_type=None` was set in the config but it is unrecognized"
    line. Why: an encoder never computes transformers' loss, but tracing it (the query
    encoder's cache) reads the `loss_function` property, which printed that line on a
    user's first query. Every other message of that logger still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("`loss_type=None` was set in the config")


_MODELING_LOGGER = "transformers.modeling_utils"
if not any(isinstance(f, _UnusedLossNotice) for f in logging.getLogger(_MODELING_LOGGER).filters):
    logging.getLogger(_MODELING_LOGGER).addFilter(_UnusedLossNotice())


def load_pretrained(
    folder: ModelFolder, auto_class: Any, what: str = "the model", sdpa: bool = True, **options: Any
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """`auto_class.from_pretrained(**options)` (with `sdpa`, SDPA attention where the
    architecture has it) and the folder's fast tokenizer; `what` names the model in errors."""
    hf_utils.logging.disable_progress_bar()  # a bar per load is noise in a command's output
    check_model_type(folder.transformer_path)
    with loading_errors(folder.path, what):
        try:
            attention = {"attn_implementation": "sdpa"} if sdpa else {}
            model = auto_class.from_pretrained(folder.transformer_path, **attention, **options)
        except (ValueError, ImportError):  # architectures without SDPA support
            if not sdpa:
                raise
            model = auto_class.from_pretrained(folder.transformer_path, **options)
        tokenizer = AutoTokenizer.from_pretrained(folder.transformer_path)
    check_tokenizer(folder.path, len(tokenizer), getattr(model.config, "vocab_size", 0) or 0)
    if not tokenizer.is_fast:
        raise SemsearchError(f"the tokenizer in {folder.path} has no fast (Rust) version")
    return model, tokenizer


def model_max_length(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> int:
    """The most tokens the model's positions and its tokenizer allow."""
    return token_limit(
        getattr(model.config, "max_position_embeddings", 512),
        getattr(model.config, "model_type", ""),
        tokenizer.model_max_length,
    )


def check_model_type(folder: Path) -> None:
    """Refuse, in one line, a `config.json` whose `model_type` this transformers does not know."""
    config = read_json(folder / "config.json")
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type is not None and model_type not in CONFIG_MAPPING_NAMES:
        raise SemsearchError(
            f"the model in {folder} has model_type {model_type!r}, which transformers "
            f"{transformers.__version__} does not know: upgrade transformers "
            "(pip install -U transformers) or use a model of a supported architecture"
        )


def check_tokenizer(folder: Path, tokens: int, model_vocabulary: int) -> None:
    """Refuse a tokenizer far smaller than the model's vocabulary: transformers builds an
    empty one, silently, when a folder lacks its tokenizer files."""
    if tokens * 2 < model_vocabulary:
        raise SemsearchError(
            f"the tokenizer in {folder} knows {tokens} tokens but the model has "
            f"{model_vocabulary}: its tokenizer files (tokenizer.json, vocab.txt, ...) are "
            "missing or incomplete; copy them from the model's source"
        )


@contextlib.contextmanager
def loading_errors(folder: Path, what: str = "the model") -> Iterator[None]:
    """Turn whatever transformers or safetensors raise while loading `folder` (corrupt
    weights, missing files) into one line naming the folder and the problem."""
    try:
        yield
    except SemsearchError:
        raise
    except Exception as exc:  # their errors have no common base: OSError, ValueError, ...
        reason = one_line(exc)
        raise SemsearchError(f"cannot load {what} in {folder}: {reason}") from exc


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
    fingerprint over the weights (and a trained pooling scorer where it is used); explicit
    arguments win over what the folder declares."""
    transformer, tokenizer = load_pretrained(folder, AutoModel)
    model_limit = model_max_length(transformer, tokenizer)
    pooling_module = Pooling(
        pooling or folder.pooling or "mean", dimension=transformer.config.hidden_size
    )
    saved_scorer = pooling_module.scorer is not None and folder.pooling_weights is not None
    if saved_scorer:
        pooling_module.load_state_dict(load_file(folder.pooling_weights))
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
    scorer = (folder.pooling_weights,) if saved_scorer else ()
    encoder._fingerprint = weights_fingerprint(folder.path, extra=scorer)
    encoder.eval()
    return encoder.to(resolve_device(device))
