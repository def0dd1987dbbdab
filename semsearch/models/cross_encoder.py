"""The cross-encoder: one transformer reads both texts of a pair together and scores the pair.

It reads `[CLS] a [SEP] b [SEP]`, every token of one text attending to the other, and a head
turns the `[CLS]` state into one logit (a score, through a sigmoid) or N class logits: more
accurate than a bi-encoder and far slower (a forward pass per pair), so it re-ranks a
bi-encoder's top candidates. Its folder is a standard Hugging Face sequence classifier, which
`AutoModelForSequenceClassification` and sentence-transformers' `CrossEncoder` load too;
`cross_encoder.json` marks it for semsearch with what those files leave open (truncation,
activation, class names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import special
from torch import nn
from tqdm.auto import tqdm
from transformers import (
    AutoModelForSequenceClassification,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers import utils as hf_utils

from semsearch import __version__
from semsearch.errors import SemsearchError
from semsearch.models.batching import SORT_CHUNK, pad, plan_batches, spread_order
from semsearch.models.loading import load_pretrained, model_max_length
from semsearch.models.model_folder import (
    CROSS_ENCODER_FILE,
    DEFAULT_MODEL,
    ModelFolder,
    read_json,
    require_kind,
    resolve_model,
)
from semsearch.models.st_layout import write_json
from semsearch.models.torch_device import Precision, autocast_for, resolve_device

Pair = tuple[str, str]


class CrossEncoder(nn.Module):
    """Transformer + classification head: a pair of texts in, one score (or N logits) out."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int,
        name: str = "",
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.name = name
        self.label_names = label_names
        # Models without segment embeddings (DistilBERT, RoBERTa) take no token_type_ids.
        self._segments = "token_type_ids" in tokenizer.model_input_names

    @classmethod
    def load(
        cls, name_or_path: str, *, max_length: int | None = None, device: str = "auto"
    ) -> CrossEncoder:
        """Load a cross-encoder folder (or hub name); a bi-encoder is refused, saying so."""
        folder = resolve_model(name_or_path)
        require_kind(folder, "cross-encoder")
        settings_file = folder.path / CROSS_ENCODER_FILE  # absent: saved by another tool
        settings = read_json(settings_file) if settings_file.is_file() else {}
        model, tokenizer = _load_classifier(folder)
        return cls._ready(
            model,
            tokenizer,
            max_length or settings.get("max_length"),
            name_or_path,
            settings.get("label_names"),
            device,
        )

    @classmethod
    def from_encoder(
        cls,
        name_or_path: str = DEFAULT_MODEL,
        num_labels: int = 1,
        *,
        label_names: list[str] | None = None,
        max_length: int | None = None,
        device: str = "auto",
    ) -> CrossEncoder:
        """A new cross-encoder on a bi-encoder's transformer weights, with a freshly
        initialised head of `num_labels` outputs: the starting point for training."""
        if num_labels < 1:
            raise SemsearchError(f"a cross-encoder needs at least one label, not {num_labels}")
        folder = resolve_model(name_or_path)
        require_kind(folder, "bi-encoder")
        model, tokenizer = _load_classifier(folder, num_labels)
        return cls._ready(
            model, tokenizer, max_length or folder.max_length, name_or_path, label_names, device
        )

    @classmethod
    def _ready(
        cls,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int | None,
        name: str,
        label_names: list[str] | None,
        device: str,
    ) -> CrossEncoder:
        limit = model_max_length(model, tokenizer)
        encoder = cls(model, tokenizer, min(max_length or limit, limit), name, label_names)
        encoder.eval()
        return encoder.to(resolve_device(device))

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def num_labels(self) -> int:
        return int(self.model.config.num_labels)

    @property
    def activation(self) -> str:
        """What `predict` applies to the logits: a sigmoid for one, a softmax for several."""
        return "sigmoid" if self.num_labels == 1 else "softmax"

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [batch, num_labels] for a padded batch of pairs; differentiable."""
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self._segments and token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        return self.model(**inputs).logits.float()

    def predict(
        self,
        pairs: Sequence[Pair],
        batch_size: int = 32,
        activation: bool = True,
        show_progress: bool = False,
        precision: Precision = "auto",
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Scores of `pairs`, in input order: [n] in (0, 1) for a one-logit model, [n, N]
        class probabilities otherwise; raw logits with `activation=False`. `progress` is
        called with the pairs of each batch once it is scored."""
        _check_pairs(pairs)
        logits = np.empty((len(pairs), self.num_labels), dtype=np.float32)
        with (
            torch.inference_mode(),
            autocast_for(self.device, precision),
            tqdm(total=len(pairs), desc="scoring", unit="pair", disable=not show_progress) as bar,
        ):
            for start in range(0, len(pairs), SORT_CHUNK):
                chunk = pairs[start : start + SORT_CHUNK]
                for rows, batch in self._sorted_batches(chunk, batch_size):
                    logits[start + rows] = self(*batch).cpu().numpy()
                    bar.update(len(rows))
                    if progress is not None:
                        progress(len(rows))
        if activation:
            logits = _activate(logits)
        return logits[:, 0] if self.num_labels == 1 else logits

    def tokenize(self, pairs: Sequence[Pair]) -> tuple[list[list[int]], list[list[int]]]:
        """Token ids and segment ids of each pair, truncated (longer text first) at `max_length`."""
        encoded = self.tokenizer(
            [first for first, _ in pairs],
            [second for _, second in pairs],
            truncation="longest_first",
            max_length=self.max_length,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=True,
        )
        return encoded["input_ids"], encoded["token_type_ids"]

    def features(self, pairs: Sequence[Pair]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Padded input ids, attention mask and segment ids on the model's device (for training)."""
        padded = self.pad(*self.tokenize(pairs))
        return tuple(tensor.to(self.device) for tensor in padded)  # type: ignore[return-value]

    def pad(
        self, token_ids: Sequence[Sequence[int]], segments: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-pad to the longest pair: (input_ids, attention_mask, token_type_ids)."""
        input_ids, mask = pad(token_ids, self.tokenizer.pad_token_id or 0)
        types, _mask = pad(segments, 0)
        return input_ids, mask, types

    def _sorted_batches(
        self, pairs: Sequence[Pair], batch_size: int
    ) -> Iterator[tuple[np.ndarray, tuple[torch.Tensor, ...]]]:
        """Padded batches of pairs of similar token length, on the device: the longest first,
        then in `spread_order`, so pairs/s (and a bar's rate) stays steady through a chunk."""
        token_ids, segments = self.tokenize(pairs)
        lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
        groups = plan_batches(lengths, batch_size, max_tokens=None)
        for rows in (groups[position] for position in spread_order(len(groups))):
            batch = self.pad([token_ids[row] for row in rows], [segments[row] for row in rows])
            yield rows, tuple(tensor.to(self.device) for tensor in batch)

    def save(self, folder: str | Path) -> None:
        """Write a Hugging Face sequence-classifier folder plus `cross_encoder.json`."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.label_names:
            self.model.config.id2label = dict(enumerate(self.label_names))
            self.model.config.label2id = {name: i for i, name in enumerate(self.label_names)}
        self.model.save_pretrained(folder, safe_serialization=True)
        # Other tools truncate where the tokenizer says: make that where this model does.
        self.tokenizer.model_max_length = self.max_length
        self.tokenizer.save_pretrained(folder)
        settings = {
            "kind": "cross-encoder",
            "num_labels": self.num_labels,
            "max_length": self.max_length,
            "activation": self.activation,
            "label_names": self.label_names,
            "input": "[CLS] text_a [SEP] text_b [SEP], the tokenizer's pair encoding",
            "semsearch_version": __version__,
        }
        write_json(folder / CROSS_ENCODER_FILE, settings)


def _load_classifier(
    folder: ModelFolder, num_labels: int | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The transformer with a sequence-classification head; with `num_labels`, a new head."""
    options: dict[str, Any] = {} if num_labels is None else {"num_labels": num_labels}
    verbosity = hf_utils.logging.get_verbosity()
    # A new head is expected to be untrained: the library's warning about it is noise here.
    hf_utils.logging.set_verbosity_error()
    try:
        model, tokenizer = load_pretrained(
            folder, AutoModelForSequenceClassification, "a cross-encoder", sdpa=False, **options
        )
    finally:
        hf_utils.logging.set_verbosity(verbosity)
    return model, tokenizer


def _activate(logits: np.ndarray) -> np.ndarray:
    if logits.shape[1] == 1:
        return special.expit(logits)
    return special.softmax(logits, axis=1)


def _check_pairs(pairs: Sequence[Pair]) -> None:
    if isinstance(pairs, str) or (
        isinstance(pairs, tuple) and len(pairs) == 2 and all(isinstance(t, str) for t in pairs)
    ):
        raise TypeError(
            "predict() takes a list of (text, text) pairs; wrap a single pair in a list"
        )
    for pair in pairs:
        if len(pair) != 2 or not all(isinstance(text, str) for text in pair):
            raise TypeError(f"each pair must be two texts, not {pair!r}")
