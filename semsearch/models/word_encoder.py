"""Word-vector encoders: a whitespace tokenizer, word embeddings, and an optional BiLSTM or CNN.

Why: the recipes semsearch is measured against (averaged GloVe, a siamese BiLSTM) embed
words, not word pieces. `WordNetwork` stands where `BiEncoder` keeps its transformer (it
takes `input_ids` and `attention_mask` and returns `last_hidden_state`), and
`WordTokenizer` where it keeps its tokenizer, so pooling, normalisation, encoding, the
training objectives and the evaluators work on these models unchanged. Tokenisation
follows sentence-transformers' `WhitespaceTokenizer`, so a saved model gives the same
vectors in either library.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Literal, get_args

import torch
from torch import nn
from transformers import BatchEncoding

from semsearch.models.word_vectors import PADDING_TOKEN

WordLayer = Literal["none", "lstm", "cnn"]
WORD_LAYERS: tuple[str, ...] = get_args(WordLayer)


class WordTokenizer:
    """Lower-cased whitespace words, punctuation stripped at their ends, stop words and
    unknown words dropped; a text with no known word becomes the padding token alone."""

    pad_token_id = 0
    is_fast = True  # nothing to compare against: it is one dictionary look-up per word

    def __init__(
        self, vocab: Sequence[str], stop_words: Sequence[str] = (), do_lower_case: bool = True
    ) -> None:
        self.vocab = list(vocab)
        if not self.vocab or self.vocab[0] != PADDING_TOKEN:
            raise ValueError(f"a word vocabulary starts with {PADDING_TOKEN!r}")
        self.index = {word: number for number, word in enumerate(self.vocab)}
        self.stop_words = set(stop_words)
        self.do_lower_case = do_lower_case

    def __len__(self) -> int:
        return len(self.vocab)

    def token_ids(self, text: str) -> list[int]:
        """The ids of the text's known words, in order (as sentence-transformers finds them)."""
        if self.do_lower_case:
            text = text.lower()
        ids = []
        for word in text.split():
            stripped = word.strip(string.punctuation)
            for candidate in (word, stripped, stripped.lower()):
                if candidate in self.stop_words:
                    break
                if candidate and candidate in self.index:
                    ids.append(self.index[candidate])
                    break
        return ids

    def __call__(
        self, texts: Sequence[str], max_length: int | None = None, **_: object
    ) -> BatchEncoding:
        """Token ids per text, like a Hugging Face tokenizer called without padding."""
        ids = [self.token_ids(text)[:max_length] or [self.pad_token_id] for text in texts]
        return BatchEncoding({"input_ids": ids})


@dataclass(frozen=True)
class WordLayerConfig:
    """The layer over the word vectors: `lstm` (bidirectional, `hidden` units per
    direction), `cnn` (`hidden` channels per kernel size) or `none` (the vectors as they are)."""

    kind: WordLayer = "none"
    hidden: int = 256
    layers: int = 1
    kernel_sizes: tuple[int, ...] = (1, 3, 5)


class WordNetwork(nn.Module):
    """Word embeddings (frozen unless `update_embeddings`) and an optional BiLSTM or CNN."""

    def __init__(
        self, embeddings: torch.Tensor, layer: WordLayerConfig, update_embeddings: bool = False
    ) -> None:
        super().__init__()
        if layer.kind not in WORD_LAYERS:
            raise ValueError(
                f"word layer must be one of {', '.join(WORD_LAYERS)}, not {layer.kind!r}"
            )
        self.layer = layer
        self.update_embeddings = update_embeddings
        self.embeddings = nn.Embedding.from_pretrained(
            embeddings.float(), freeze=not update_embeddings
        )
        width = embeddings.shape[1]
        self.lstm: nn.LSTM | None = None
        self.convs: nn.ModuleList | None = None
        if layer.kind == "lstm":
            self.lstm = nn.LSTM(
                width, layer.hidden, num_layers=layer.layers, bidirectional=True, batch_first=True
            )
            width = 2 * layer.hidden
        elif layer.kind == "cnn":
            self.convs = nn.ModuleList(
                nn.Conv1d(width, layer.hidden, size, padding=(size - 1) // 2)
                for size in layer.kernel_sizes
            )
            width = layer.hidden * len(layer.kernel_sizes)
        self.config = SimpleNamespace(hidden_size=width, model_type="word-vectors")

    @property
    def embedding_dimension(self) -> int:
        return int(self.embeddings.embedding_dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
        """Token vectors [batch, tokens, hidden_size] in `last_hidden_state`."""
        tokens = self.embeddings(input_ids)
        if self.lstm is not None:
            tokens = self._run_lstm(tokens, attention_mask)
        elif self.convs is not None:
            channels = tokens.transpose(1, 2)
            tokens = torch.cat([conv(channels) for conv in self.convs], dim=1).transpose(1, 2)
        return SimpleNamespace(last_hidden_state=tokens)

    def _run_lstm(self, tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # Packed, so that padding never flows into the backward direction's states.
        lengths = attention_mask.sum(dim=1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(
            tokens, lengths, batch_first=True, enforce_sorted=False
        )
        output, _ = self.lstm(packed)  # type: ignore[misc]
        unpacked, _ = nn.utils.rnn.pad_packed_sequence(
            output, batch_first=True, total_length=tokens.shape[1]
        )
        return unpacked
