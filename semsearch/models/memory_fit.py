"""Batches on a device that can run out of memory: halve what does not fit, and remember.

Why: the default GPU batch (256 texts, 65,536 tokens) fits a small model with room to
spare, but a base-size model, long texts or a GPU shared with other work can run out of
memory mid-build. Rather than failing an hour in, a batch that does not fit is run in
halves (recursively), and later batches are cut to the size that fitted, with one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

import torch

from semsearch.errors import SemsearchError

log = logging.getLogger(__name__)


class Splittable(Protocol):
    @property
    def size(self) -> int: ...

    def split(self) -> tuple[Splittable, Splittable]: ...


Piece = TypeVar("Piece", bound=Splittable)


class MemoryFit:
    """Runs batches, halving those the device has no memory for; see the module docstring."""

    def __init__(self) -> None:
        self.limit: int | None = None  # the most rows known to fit, once something did not

    def pieces(self, batch: Piece) -> list[Piece]:
        """`batch`, cut into pieces no larger than what is known to fit."""
        if self.limit is None or batch.size <= self.limit:
            return [batch]
        first, second = batch.split()
        return self.pieces(first) + self.pieces(second)

    def run(self, forward: Callable[[Piece], torch.Tensor], batch: Piece) -> torch.Tensor:
        """`forward(batch)`, or its halves' results concatenated if it does not fit."""
        try:
            return forward(batch)
        except torch.OutOfMemoryError:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if batch.size <= 1:
                raise SemsearchError(
                    "the GPU ran out of memory on a single batch row: use --device cpu, or a "
                    "model with a smaller max length"
                ) from None
            if self.limit is None:
                log.warning(
                    "the GPU ran out of memory on a batch of %d rows: halving batches", batch.size
                )
            self.limit = min(self.limit or batch.size, batch.size // 2)
        halves = batch.split()
        return torch.cat(
            [self.run(forward, piece) for half in halves for piece in self.pieces(half)]
        )
