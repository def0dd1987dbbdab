"""Running prepared batches through a model and gathering their vectors in input order.

Why apart from the bi-encoder: padded and packed batches, on torch or OpenVINO, all end in
the same loop: a batch the device has no memory for runs in pieces (`MemoryFit`), vectors
computed on a GPU wait there and come back to the host in one copy per `FLUSH_ROWS` (one
sync instead of one per batch), and a progress bar and callback hear of each batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from semsearch.errors import SemsearchError

log = logging.getLogger(__name__)

# Vectors computed on a GPU wait there until this many are ready, then come back in one copy.
FLUSH_ROWS = 16_384


class MemoryFit:
    """Runs batches (anything with `size` and `split()`), halving those the device has no
    memory for, and cutting later ones to what fitted.

    Why: the default GPU batch (256 texts, 65,536 tokens) fits a small model with room to
    spare, but a base-size model, long texts or a GPU shared with other work can run out of
    memory mid-build; rather than failing an hour in, the build goes on with one warning.
    """

    def __init__(self) -> None:
        self.limit: int | None = None  # the most rows known to fit, once something did not

    def pieces(self, batch: Any) -> list[Any]:
        """`batch`, cut into pieces no larger than what is known to fit."""
        if self.limit is None or batch.size <= self.limit:
            return [batch]
        first, second = batch.split()
        return self.pieces(first) + self.pieces(second)

    def run(self, forward: Callable[[Any], torch.Tensor], batch: Any) -> torch.Tensor:
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


def run_batches(
    batches: Iterable[Any],
    forward: Callable[[Any], torch.Tensor],
    shape: tuple[int, int],
    show_progress: bool = False,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """The vectors [texts, dimension] (`shape`, float32) that `forward` gives each batch, at
    the rows the batch names (`batch.rows`)."""
    output = np.empty(shape, dtype=np.float32)
    pending: list[tuple[np.ndarray, torch.Tensor]] = []

    def flush() -> None:
        if pending:
            rows = np.concatenate([rows for rows, _ in pending])
            output[rows] = torch.cat([vectors for _, vectors in pending]).cpu().numpy()
            pending.clear()

    fit = MemoryFit()
    with (
        torch.inference_mode(),
        tqdm(total=len(output), desc="encoding", unit="text", disable=not show_progress) as bar,
    ):
        for batch in batches:
            for piece in fit.pieces(batch):
                pending.append((piece.rows, fit.run(forward, piece)))
            if sum(len(rows) for rows, _ in pending) >= FLUSH_ROWS:
                flush()
            bar.update(len(batch.rows))
            if progress is not None:
                progress(len(batch.rows))
        flush()
    return output
