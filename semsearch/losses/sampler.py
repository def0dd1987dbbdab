"""Batches without repeated texts, for in-batch-negative objectives such as `mnr`.

With in-batch negatives, a text that occurs twice in one batch is both some row's
positive and another row's negative: the loss then pushes a text away from itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence

import numpy as np
from torch.utils.data import Sampler


class NoDuplicatesBatchSampler(Sampler[list[int]]):
    """Shuffled batches of row indices where no text occurs twice in a batch.

    A row whose texts clash with the batch being filled waits for the next batch, so
    every row is used once per epoch; only batches at the end of an epoch can be short
    (when the rows left all clash). Batches are fixed per epoch, so `len()` is exact.

    Args:
        columns: the text columns to keep unique, each a sequence with one text per row.
        batch_size: rows per batch.
        seed: shuffling seed; epoch e shuffles with (seed, e), see `set_epoch`.
        drop_last: drop batches shorter than `batch_size`.
    """

    def __init__(
        self,
        columns: Sequence[Sequence[str]],
        batch_size: int,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        if len({len(column) for column in columns}) != 1:
            raise ValueError("the sampler needs at least one column, all of the same length")
        self.columns = columns
        self.batch_size = batch_size
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self._batches: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for `epoch` (call it at the start of each one, as with DistributedSampler)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._epoch_batches())

    def __len__(self) -> int:
        return len(self._epoch_batches())

    def _epoch_batches(self) -> list[list[int]]:
        if self._batches is None or self._batches[0] != self.epoch:
            self._batches = (self.epoch, self._make_batches())
        return self._batches[1]

    def _make_batches(self) -> list[list[int]]:
        rng = np.random.default_rng((self.seed, self.epoch))
        waiting = deque(int(row) for row in rng.permutation(len(self.columns[0])))
        batches = []
        while waiting:
            batch, seen, clashing = [], set(), []
            while waiting and len(batch) < self.batch_size:
                row = waiting.popleft()
                texts = {column[row] for column in self.columns}
                if seen.isdisjoint(texts):
                    batch.append(row)
                    seen.update(texts)
                else:
                    clashing.append(row)
            waiting.extendleft(reversed(clashing))  # first in line for the next batch
            if len(batch) == self.batch_size or not self.drop_last:
                batches.append(batch)
        return batches
