"""Texts tokenised ahead of the encoder (torch-free, so a build's read stages need no torch)."""

from __future__ import annotations

from collections.abc import Sequence


class TokenizedTexts(list):
    """Texts that carry their token ids (from the encoder's own `tokenize`), so `encode`
    does not tokenise them again: a build tokenises the next part while this one encodes."""

    def __init__(self, texts: Sequence[str], token_ids: list[list[int]]) -> None:
        super().__init__(texts)
        if len(token_ids) != len(self):
            raise ValueError(f"{len(self)} texts but {len(token_ids)} token id lists")
        self.token_ids = token_ids
