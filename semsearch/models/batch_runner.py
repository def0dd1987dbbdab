"""Running prepared batches through a model and gathering their vectors in input order.

Why apart from the bi-encoder: padded and packed batches, on torch or OpenVINO, all end in
the same loop: a batch the device has no memory for runs in pieces (`memory_fit`), vectors
computed on a GPU wait there and come back to the host in one copy per `FLUSH_ROWS` (one
sync instead of one per batch), and a progress bar and callback hear of each batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from semsearch.models.memory_fit import MemoryFit

# Vectors computed on a GPU wait there until this many are ready, then come back in one copy.
FLUSH_ROWS = 16_384


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
