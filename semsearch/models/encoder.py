"""The `Encoder` protocol: what every text encoder offers, whatever library or device runs it;
and `TokenizedTexts`, texts tokenised ahead of it.

Why a protocol: the torch bi-encoder (padded, packed, compiled, int8, or its padded batches
run by OpenVINO through `BiEncoder.use_runtime`) and the torch-free exported query encoder
(`exported_query_encoder.ExportedQueryEncoder`) are different classes, chosen in one place
(`query_loader`: `open_for_queries`, `open_for_rows`, `open_model_export`; else `BiEncoder.load` for builds). The
build, `add`, the searcher and the server receive an `Encoder` and use only these members.
`tests/models/test_encoder.py` holds every implementation to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from semsearch.models.spec import EncoderSpec


class TokenizedTexts(list):
    """Texts that carry their token ids (from the encoder's own `tokenize`), so `encode`
    does not tokenise them again: a build tokenises the next part while this one encodes
    (torch-free, so a build's read stages need no torch)."""

    def __init__(self, texts: Sequence[str], token_ids: list[list[int]]) -> None:
        super().__init__(texts)
        if len(token_ids) != len(self):
            raise ValueError(f"{len(self)} texts but {len(token_ids)} token id lists")
        self.token_ids = token_ids


@runtime_checkable
class Encoder(Protocol):
    """Texts in, one float32 vector a text out, with the facts an index records of it."""

    @property
    def spec(self) -> EncoderSpec:
        """What an index records of the model: name, fingerprint, pooling, prompts, ..."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def fingerprint(self) -> str:
        """sha256 over the weights: an index refuses an encoder whose weights differ."""

    @property
    def quantization(self) -> str | None: ...

    @property
    def runtime(self) -> str:
        """What runs the model (`torch`, `openvino-bf16`, ...): recorded with each build."""

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, cut at the model's window, unpadded."""

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        show_progress: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Vectors [len(texts), dimension], in input order, no prompt added."""

    def encode_query(self, texts: Sequence[str], **options: Any) -> np.ndarray:
        """`encode` with the query prompt before each text."""

    def encode_document(self, texts: Sequence[str], **options: Any) -> np.ndarray:
        """`encode` with the document prompt before each text."""
