"""A stand-in encoder that looks vectors up in a table, so metrics can be worked by hand."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest


class TableEncoder:
    """`encode` returns each text's vector from a table and records what it was asked."""

    def __init__(self, table: Mapping[str, Sequence[float]]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([self.table[text] for text in texts], dtype=np.float32)


@pytest.fixture()
def table_encoder() -> Callable[[Mapping[str, Sequence[float]]], TableEncoder]:
    return TableEncoder
