"""Where a model runs and in which precision: shared by the bi-encoder, the cross-encoder,
word-vector models and training, so `auto` means the same everywhere."""

from __future__ import annotations

import contextlib
import copy

import torch
from torch import nn

from semsearch.errors import SemsearchError
from semsearch.options import Precision

HALF_PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(device: str) -> torch.device:
    """`auto` picks CUDA when present; anything else must be a device torch knows."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except RuntimeError as exc:
        raise SemsearchError(f"unknown device {device!r}: use auto, cpu or cuda") from exc
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise SemsearchError("device 'cuda' was asked for but no CUDA GPU is visible: use cpu")
    return chosen


def autocast_for(device: torch.device, precision: Precision) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA by default (fp16 on request); full fp32 on CPU."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=HALF_PRECISIONS[precision])


def half_copy(model: nn.Module, dtype: torch.dtype, cache: dict) -> nn.Module:
    """`model` cast to `dtype`, kept in `cache` for reuse while its weights stand.

    Casting the weights beats autocast for inference: no cast kernel before every matrix
    product, which is what bounds a small model's speed on a GPU. The copy is rebuilt
    whenever a weight has changed since (training bumps the tensors' version counters).
    """
    key = (dtype, tuple((p.data_ptr(), p._version) for p in model.parameters()))
    if cache.get("key") != key:
        cache.clear()  # free the old copy before making the new one
        cache["model"] = copy.deepcopy(model).to(dtype).eval()
        cache["key"] = key
    return cache["model"]
