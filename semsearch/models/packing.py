"""Packed batches: several texts back to back in one row, each attending only to itself.

Why: a GPU spends every padded position in every layer. Packing puts texts end to end in
rows of `width` tokens, restarts the position ids at each text and keeps each text's
attention to itself (a block-diagonal mask, or on CUDA each text's bounds for a varlen
kernel: `VARLEN_KIND`), so the only padding left is each row's end; token vectors are then
gathered back per text and pooled by the usual `Pooling`. The vectors are the padded path's
(tested to cosine 0.999); whether it is faster depends on the device.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from semsearch.errors import SemsearchError, one_line
from semsearch.models.batching import SORT_CHUNK, Tokenize, in_background

log = logging.getLogger(__name__)

# Model families whose embeddings take explicit position ids, and where a text's positions
# start: BERT at 0, MPNet (RoBERTa-style) after its padding index.
POSITION_START = {"bert": lambda config: 0, "mpnet": lambda config: config.pad_token_id + 1}
# A masked SDPA call runs PyTorch's memory-efficient kernel, never its flash one. So on CUDA,
# in half precision, BERT's packed attention runs torch's variable-length flash attention
# (`torch.nn.attention.varlen`, registered with transformers as `VARLEN_KIND`) on each text's
# bounds (cu_seqlens), with no mask; transformers' own varlen path needs the flash-attn
# package, which the GPU image lacks. MPNet's relative position bias fits no flash kernel.
VARLEN_KIND = "semsearch_varlen"
VARLEN_MODELS = ("bert",)
VARLEN_DEVICES = ("cuda",)
VARLEN_DTYPES = (torch.float16, torch.bfloat16)
MASK_KINDS = ("sdpa", "eager", VARLEN_KIND)


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
            self.rows[low:high],
            self.input_ids[row_low:row_high],
            self.position_ids[row_low:row_high],
            torch.where(segments >= 0, segments - low, -1),
            self.text_row[low:high] - row_low,
            self.text_start[low:high],
            self.lengths[low:high],
        )


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


def pack(
    token_ids: Sequence[Sequence[int]],
    rows: np.ndarray,
    plan: list[list[int]],
    width: int,
    pad_id: int,
    start: int,
    pin_memory: bool = False,
) -> PackedBatch:
    """One batch of packed rows, `plan` naming which of `token_ids` go in each; with
    `pin_memory`, its tensors page-locked, so a copy to a GPU need not block."""
    count = sum(len(row) for row in plan)
    input_ids = np.full((len(plan), width), pad_id, dtype=np.int64)
    positions = np.zeros((len(plan), width), dtype=np.int64)
    segments = np.full((len(plan), width), -1, dtype=np.int64)
    order, text_row, text_start, lengths = (np.empty(count, np.int64) for _ in range(4))
    text = 0
    for row_number, row in enumerate(plan):
        offset = 0
        for member in row:
            ids = token_ids[member]
            end = offset + len(ids)
            input_ids[row_number, offset:end] = ids
            positions[row_number, offset:end] = np.arange(start, start + len(ids))
            segments[row_number, offset:end] = text
            order[text], text_row[text] = member, row_number
            text_start[text], lengths[text] = offset, len(ids)
            text, offset = text + 1, end
    tensors = [torch.from_numpy(array) for array in (input_ids, positions, segments)]
    if pin_memory:
        tensors = [tensor.pin_memory() for tensor in tensors]
    return PackedBatch(rows[order], *tensors, text_row, text_start, lengths)


def packed_batches(
    texts: Sequence[str],
    tokenize: Tokenize,
    pad_id: int,
    width: int,
    max_tokens: int,
    start: int,
    pin_memory: bool = False,
) -> Iterator[PackedBatch]:
    """Every text once, packed into rows of `width` tokens, at most `max_tokens` per batch
    (page-locked with `pin_memory`: made in a background thread, ahead of the copy)."""
    rows_per_batch = max(1, max_tokens // width)
    for first in range(0, len(texts), SORT_CHUNK):
        token_ids = tokenize(texts[first : first + SORT_CHUNK])
        lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
        plan = plan_rows(lengths, width)
        positions = np.arange(first, first + len(token_ids))
        for low in range(0, len(plan), rows_per_batch):
            yield pack(
                token_ids,
                positions,
                plan[low : low + rows_per_batch],
                width,
                pad_id,
                start,
                pin_memory,
            )


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


def varlen_kernel() -> Callable | None:
    """torch's variable-length attention (CUDA only), or None where torch has none."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def uses_varlen(model, device: torch.device) -> bool:
    """True where packed batches of `model` (on `device`) go through varlen attention, without
    a mask."""
    config = model.config
    return (
        config.model_type in VARLEN_MODELS
        and config._attn_implementation in ("sdpa", VARLEN_KIND)
        and device.type in VARLEN_DEVICES
        and model.dtype in VARLEN_DTYPES
        and varlen_kernel() is not None
    )


def varlen_attention(
    module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    cu_seq_lens_q: torch.Tensor | None = None,
    max_length_q: int | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """A transformers attention function: [B, H, W, D] in, [B, W, H, D] out. With
    `cu_seq_lens_q` (a packed batch), each span of the batch's tokens laid end to end
    attends only to itself; without, plain SDPA with the mask transformers made."""
    if cu_seq_lens_q is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    batch, heads, width, size = query.shape

    def flat(states: torch.Tensor) -> torch.Tensor:
        return states.transpose(1, 2).reshape(batch * width, heads, size)

    output = varlen_kernel()(
        flat(query),
        flat(key),
        flat(value),
        cu_seq_lens_q,
        cu_seq_lens_q,
        max_length_q,
        max_length_q,
        scale=scaling,
    )
    return output.reshape(batch, width, heads, size), None


def sequence_bounds(batch: PackedBatch, width: int) -> tuple[np.ndarray, int]:
    """cu_seqlens (int32) of `batch`'s rows laid end to end: a span per text and one per
    row's padded end (it attends to itself, as with the mask); and the longest span."""
    rows = batch.size
    used = np.zeros(rows, np.int64)
    np.add.at(used, batch.text_row, batch.lengths)
    padded = np.flatnonzero(used < width)
    bounds = np.unique(
        np.concatenate(
            [
                batch.text_row * width + batch.text_start,
                np.arange(rows + 1) * width,
                padded * width + used[padded],
            ]
        )
    )
    return bounds.astype(np.int32), int(np.diff(bounds).max(initial=0))


class PackedAttention:
    """Runs packed batches through `model`, each text attending only to itself: by varlen
    bounds where `uses_varlen`, else by the dense mask. A varlen kernel that fails (a GPU it
    never ran on) hands over to the mask for good, with one warning line."""

    def __init__(self, model, width: int, device: torch.device) -> None:
        self.model = model
        self.width = width
        self.varlen = uses_varlen(model, device)
        if self.varlen:
            # Packed calls (with cu_seqlens) take the varlen kernel, every other call (a padded
            # batch, a query) SDPA as before.
            from transformers import AttentionInterface, AttentionMaskInterface
            from transformers.masking_utils import sdpa_mask

            AttentionInterface.register(VARLEN_KIND, varlen_attention)
            AttentionMaskInterface.register(VARLEN_KIND, sdpa_mask)
            model.config._attn_implementation = VARLEN_KIND

    def run(
        self, batch: PackedBatch, input_ids: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """The last hidden states [rows, width, dim] of `batch`, already on the model's device."""
        device = input_ids.device
        if self.varlen:
            bounds, longest = sequence_bounds(batch, self.width)
            try:
                return self.model(
                    input_ids=input_ids,
                    position_ids=positions,
                    attention_mask=None,
                    cu_seq_lens_q=to_device(bounds, device),
                    max_length_q=longest,
                ).last_hidden_state
            except torch.OutOfMemoryError:
                raise  # smaller batches, not another kernel (`MemoryFit`)
            except (RuntimeError, NotImplementedError, TypeError) as exc:
                log.warning(
                    "varlen attention failed on %s (%s): packing with a dense mask instead",
                    device,
                    one_line(exc),
                )
                self.varlen = False
        segments = batch.segments.to(device, non_blocking=device.type == "cuda")
        mask = block_mask(segments, self.model.config._attn_implementation, self.model.dtype)
        return self.model(
            input_ids=input_ids, position_ids=positions, attention_mask=mask
        ).last_hidden_state


def packed_run(
    texts: Sequence,
    tokenize: Tokenize,
    model,
    device: torch.device,
    pad_id: int,
    width: int,
    max_tokens: int,
    pin_memory: bool,
    pool: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> tuple[Iterator[PackedBatch], Callable[[PackedBatch], torch.Tensor]]:
    """Packed batches of `texts` (made in a background thread) and what runs one on
    `device`: `model`'s token vectors, gathered per text and pooled by `pool`."""
    start = position_start(model)
    on_gpu = device.type == "cuda"
    batches = in_background(
        lambda: packed_batches(
            texts, tokenize, pad_id, width, max_tokens, start, pin_memory=on_gpu and pin_memory
        )
    )
    attention = PackedAttention(model, width, device)

    def forward(batch: PackedBatch) -> torch.Tensor:
        input_ids = batch.input_ids.to(device, non_blocking=on_gpu)
        positions = batch.position_ids.to(device, non_blocking=on_gpu)
        tokens, token_mask = unpack(attention.run(batch, input_ids, positions), batch)
        return pool(tokens.float(), token_mask)

    return batches, forward
