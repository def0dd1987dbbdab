"""Turning texts into padded model batches, prepared ahead of the model in a background thread.

Why: a small model on a GPU finishes a batch faster than Python can tokenise and pad the
next one. Here tokenising (which releases the GIL) and padding run in a producer thread,
batches are cut by a token budget (short texts in large batches, long ones in small), and
they run in an order spread over the lengths (`spread_order`), so texts/s, and a progress
bar's ETA, stays steady instead of climbing from the long texts to the short ones.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from semsearch.errors import SemsearchError

# Texts are tokenised and sorted in chunks of this many: it bounds the memory that token
# lists take while keeping batches of similar length, and the model starts on the first
# chunk while the next one is tokenised.
SORT_CHUNK = 16_384
Tokenize = Callable[[Sequence[str]], list[list[int]]]
# Batches waiting for the model; enough to hide a slow tokenisation, few enough to bound memory.
QUEUE_DEPTH = 8
Item = TypeVar("Item")
# Rows per batch and padded tokens per batch by default. On a CPU the count barely matters;
# on a GPU large batches hide Python's per-batch cost, and the token budget keeps batches of
# long texts within the same memory as batches of short ones.
CPU_BATCH = (64, None)
GPU_BATCH = (256, 65_536)


@dataclass(frozen=True)
class Batch:
    """Rows `rows` (positions in the input) as padded `input_ids` and `attention_mask`."""

    rows: np.ndarray
    input_ids: torch.Tensor
    attention_mask: torch.Tensor

    @property
    def size(self) -> int:
        return len(self.rows)

    def split(self) -> tuple[Batch, Batch]:
        """The first and second half of the rows, for a device that ran out of memory."""
        half = self.size // 2
        return (
            Batch(self.rows[:half], self.input_ids[:half], self.attention_mask[:half]),
            Batch(self.rows[half:], self.input_ids[half:], self.attention_mask[half:]),
        )


def plan_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None) -> list[np.ndarray]:
    """Row groups, longest texts first, each at most `batch_size` rows and `max_tokens` padded tokens.

    Sorting by length keeps padding small; the token budget (rows x longest row) lets a batch
    of short texts hold many more rows than one of long texts at the same memory and time.
    """
    order = np.argsort(-lengths, kind="stable")
    if max_tokens is None:
        return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    groups, start = [], 0
    while start < len(order):
        longest = max(int(lengths[order[start]]), 1)
        count = max(1, min(batch_size, max_tokens // longest))
        groups.append(order[start : start + count])
        start += count
    return groups


def spread_order(count: int) -> np.ndarray:
    """0 .. count-1 in bit-reversed order (0, 4, 2, 6, 1, 5, 3, 7 for 8): 0 comes first, and
    every run of consecutive positions is spread evenly over the whole range."""
    bits = max(count - 1, 0).bit_length()
    positions = np.arange(1 << bits)
    flipped = np.zeros_like(positions)
    for bit in range(bits):
        flipped |= ((positions >> bit) & 1) << (bits - 1 - bit)
    return flipped[flipped < count]


def pad(
    token_ids: Sequence[Sequence[int]], pad_id: int, multiple: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists to the longest, rounded up to `multiple`: (input_ids, attention_mask).

    Rounding keeps the number of distinct batch shapes small, and each new shape costs a
    GPU library its kernel choice (and, for some attention kernels, a compiled plan).
    """
    lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.int64, count=len(token_ids))
    width = -(-int(lengths.max(initial=0)) // multiple) * multiple
    mask = np.arange(width) < lengths[:, None]
    input_ids = np.full((len(token_ids), width), pad_id, dtype=np.int64)
    flat = itertools.chain.from_iterable(token_ids)
    input_ids[mask] = np.fromiter(flat, dtype=np.int64, count=int(lengths.sum()))
    return torch.from_numpy(input_ids), torch.from_numpy(mask.astype(np.int64))


def batch_settings(device: torch.device) -> tuple[int, int | None]:
    """Default (rows per batch, padded tokens per batch) for encoding on `device`."""
    return GPU_BATCH if device.type == "cuda" else CPU_BATCH


def batch_limits(
    device: torch.device, batch_size: int | None, max_tokens: int | None
) -> tuple[int, int | None]:
    """Rows and padded tokens per batch: `batch_settings` where `batch_size` is None (a
    token budget given is kept); refused in one line below 1."""
    if batch_size is None:
        batch_size, default_tokens = batch_settings(device)
        max_tokens = max_tokens or default_tokens
    if batch_size < 1 or (max_tokens is not None and max_tokens < 1):
        raise SemsearchError(
            f"batch size ({batch_size}) and token budget ({max_tokens}) must be at "
            "least 1: pass a positive --batch-size"
        )
    return batch_size, max_tokens


@dataclass(frozen=True)
class BatchShape:
    """How texts are cut into batches: rows, padded tokens, width rounding, page-locking."""

    batch_size: int
    max_tokens: int | None = None
    pad_multiple: int = 1
    pin_memory: bool = False


def padded_batches(
    texts: Sequence[str], tokenize: Tokenize, pad_id: int, shape: BatchShape
) -> Iterator[Batch]:
    """Every text of `texts` once, in padded batches, made in the caller's thread; a chunk's
    longest batch first (a device short of memory finds out at once), then the others in
    `spread_order`, so every stretch of batches costs about the same per text."""
    for start in range(0, len(texts), SORT_CHUNK):
        token_ids = tokenize(texts[start : start + SORT_CHUNK])
        lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
        groups = plan_batches(lengths, shape.batch_size, shape.max_tokens)
        for rows in (groups[position] for position in spread_order(len(groups))):
            input_ids, mask = pad([token_ids[row] for row in rows], pad_id, shape.pad_multiple)
            if shape.pin_memory:
                input_ids, mask = input_ids.pin_memory(), mask.pin_memory()
            yield Batch(start + rows, input_ids, mask)


def prepared_batches(
    texts: Sequence[str], tokenize: Tokenize, pad_id: int, shape: BatchShape
) -> Iterator[Batch]:
    """`padded_batches`, made by a background thread while the caller runs the model.

    Texts that fit in one batch (a query) are prepared inline: a thread would only add its
    start-up to the latency. An exception in the thread is raised here; leaving the loop
    early stops the thread.
    """
    if len(texts) <= shape.batch_size:
        yield from padded_batches(texts, tokenize, pad_id, shape)
        return
    yield from in_background(lambda: padded_batches(texts, tokenize, pad_id, shape))


def in_background(make: Callable[[], Iterator[Item]]) -> Iterator[Item]:
    """The items of `make()`, produced by a background thread while the caller uses them.

    An exception in the thread is raised here; leaving the loop early stops the thread.
    """
    ready: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
    stop = threading.Event()
    done = object()

    def offer(item: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for batch in make():
                if not offer(batch):
                    return
            offer(done)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            offer(exc)

    producer = threading.Thread(target=produce, name="semsearch-batches", daemon=True)
    producer.start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        producer.join()
