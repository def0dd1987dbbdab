"""Packed batches: several texts back to back in one row, each attending only to itself.

Why: a padded batch computes on its pad tokens. Sorting texts by length keeps those few, but
a GPU spends every padded position in every layer; packing puts texts end to end in rows
of `width` tokens, restarts the position ids at each text, and gives attention a
block-diagonal mask, so the only padding left is the end of each row. The token vectors
are then gathered back per text and pooled by the usual `Pooling`. Whether it is faster is
a property of the device (see `BiEncoder.encode(packing=True)`); the vectors are the
padded path's (tested to cosine 0.999).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from semsearch.errors import SemsearchError
from semsearch.models.batching import SORT_CHUNK, Tokenize

# Model families whose embeddings take explicit position ids, and where a text's positions
# start: BERT at 0, MPNet (RoBERTa-style) after its padding index.
POSITION_START = {"bert": lambda config: 0, "mpnet": lambda config: config.pad_token_id + 1}
MASK_KINDS = ("sdpa", "eager")


@dataclass(frozen=True)
class PackedBatch:
    """Texts `rows` (input positions, row-major order) packed into `input_ids` [R, W]."""

    rows: np.ndarray
    input_ids: torch.Tensor
    position_ids: torch.Tensor
    segments: torch.Tensor  # [R, W]: each token's text number in this batch, -1 at row ends
    text_row: np.ndarray  # per text: its packed row
    text_start: np.ndarray  # per text: its first token in that row
    lengths: np.ndarray  # per text: its tokens

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    def split(self) -> tuple[PackedBatch, PackedBatch]:
        """The first and second half of the packed rows, for a device that ran out of memory."""
        half = self.size // 2
        cut = int(np.searchsorted(self.text_row, half))
        return self._slice(0, half, 0, cut), self._slice(half, self.size, cut, len(self.rows))

    def _slice(self, row_low: int, row_high: int, low: int, high: int) -> PackedBatch:
        segments = self.segments[row_low:row_high]
        return PackedBatch(
            self.rows[low:high], self.input_ids[row_low:row_high],
            self.position_ids[row_low:row_high], torch.where(segments >= 0, segments - low, -1),
            self.text_row[low:high] - row_low, self.text_start[low:high], self.lengths[low:high],
        )  # fmt: skip


def position_start(model) -> int:
    """Where a text's position ids start for `model`; a one-line error for models packing
    does not support (their embeddings or attention masks work differently)."""
    config = model.config
    if config.model_type not in POSITION_START:
        raise SemsearchError(
            f"packing supports BERT and MPNet encoders, not {config.model_type!r}: encode without packing"
        )
    if config._attn_implementation not in MASK_KINDS:
        raise SemsearchError(
            f"packing needs sdpa or eager attention, not {config._attn_implementation!r}: "
            "encode without packing"
        )
    return POSITION_START[config.model_type](config)


def plan_rows(lengths: np.ndarray, width: int) -> list[list[int]]:
    """Texts (by index) grouped into rows of at most `width` tokens, longest texts first.

    Each row starts with the longest text left and is topped up with the shortest ones that
    still fit: one pass over the sorted lengths, and rows come out nearly full.
    """
    if len(lengths) and int(lengths.max()) > width:
        raise ValueError(f"a text of {int(lengths.max())} tokens does not fit rows of {width}")
    order = np.argsort(-lengths, kind="stable")
    rows, low, high = [], 0, len(order) - 1
    while low <= high:
        row, used = [int(order[low])], int(lengths[order[low]])
        low += 1
        while low <= high and used + int(lengths[order[high]]) <= width:
            row.append(int(order[high]))
            used += int(lengths[order[high]])
            high -= 1
        rows.append(row)
    return rows


def pack(token_ids: Sequence[Sequence[int]], rows: np.ndarray, plan: list[list[int]],
         width: int, pad_id: int, start: int, pin_memory: bool = False) -> PackedBatch:  # fmt: skip
    """One batch of packed rows, `plan` naming which of `token_ids` go in each; with
    `pin_memory`, its tensors page-locked, so a copy to a GPU need not block."""
    count = sum(len(row) for row in plan)
    input_ids = np.full((len(plan), width), pad_id, dtype=np.int64)
    positions = np.zeros((len(plan), width), dtype=np.int64)
    segments = np.full((len(plan), width), -1, dtype=np.int64)
    order, text_row, text_start = (
        np.empty(count, np.int64),
        np.empty(count, np.int64),
        np.empty(count, np.int64),
    )
    lengths = np.empty(count, np.int64)
    text = 0
    for row_number, row in enumerate(plan):
        offset = 0
        for member in row:
            ids = token_ids[member]
            end = offset + len(ids)
            input_ids[row_number, offset:end] = ids
            positions[row_number, offset:end] = np.arange(start, start + len(ids))
            segments[row_number, offset:end] = text
            order[text], text_row[text], text_start[text], lengths[text] = (
                member,
                row_number,
                offset,
                len(ids),
            )
            text, offset = text + 1, end
    tensors = [torch.from_numpy(array) for array in (input_ids, positions, segments)]
    if pin_memory:
        tensors = [tensor.pin_memory() for tensor in tensors]
    return PackedBatch(rows[order], *tensors, text_row, text_start, lengths)


def packed_batches(texts: Sequence[str], tokenize: Tokenize, pad_id: int, width: int,
                   max_tokens: int, start: int, pin_memory: bool = False) -> Iterator[PackedBatch]:  # fmt: skip
    """Every text once, packed into rows of `width` tokens, at most `max_tokens` per batch
    (page-locked with `pin_memory`: made in a background thread, ahead of the copy)."""
    rows_per_batch = max(1, max_tokens // width)
    for first in range(0, len(texts), SORT_CHUNK):
        token_ids = tokenize(texts[first : first + SORT_CHUNK])
        lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
        plan = plan_rows(lengths, width)
        positions = np.arange(first, first + len(token_ids))
        for low in range(0, len(plan), rows_per_batch):
            yield pack(token_ids, positions, plan[low : low + rows_per_batch], width, pad_id,
                       start, pin_memory)  # fmt: skip


def block_mask(segments: torch.Tensor, kind: str, dtype: torch.dtype) -> torch.Tensor:
    """The 4D attention mask [R, 1, W, W] that keeps each text to itself: boolean (True:
    attend) for SDPA, additive for eager attention. Row-end padding attends to itself only,
    so no softmax row is empty."""
    same = segments[:, :, None] == segments[:, None, :]
    same &= segments[:, :, None] >= 0
    same |= torch.eye(segments.shape[1], dtype=torch.bool, device=segments.device)
    same = same[:, None]
    if kind == "sdpa":
        return same
    return torch.zeros(same.shape, dtype=dtype, device=segments.device).masked_fill(
        ~same, torch.finfo(dtype).min
    )


def unpack(hidden: torch.Tensor, batch: PackedBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Token vectors per text, [texts, longest, dim], and their mask, as pooling takes them."""
    width = hidden.shape[1]
    longest = int(batch.lengths.max())
    steps = torch.arange(longest, device=hidden.device)
    lengths = to_device(batch.lengths, hidden.device)
    starts = to_device(batch.text_row * width + batch.text_start, hidden.device)
    mask = steps[None, :] < lengths[:, None]
    flat = (starts[:, None] + steps[None, :]).clamp(max=hidden.shape[0] * width - 1)
    tokens = hidden.reshape(-1, hidden.shape[-1])[flat]
    return tokens, mask.long()


def to_device(values: np.ndarray, device: torch.device) -> torch.Tensor:
    """`values` as a tensor on `device`. On CUDA the copy is from page-locked memory and does
    not block, so it queues behind the model's work instead of waiting for it; elsewhere it
    is a plain tensor."""
    tensor = torch.from_numpy(np.ascontiguousarray(values))
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
