"""Device facts every backend shares: out-of-memory errors, the torch cache, tile budgets.

Why one module: a GPU that runs out of memory is recognised here, the torch allocator's
cache is released here before another library (GPU FAISS) allocates on the same device,
and the memory an exact search may use per tile is decided here, so backends only ask.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where a device is used, not to read an index
    import torch

log = logging.getLogger(__name__)

# Score tiles on a CPU: a fixed budget (a [1024, 32768] float32 tile is 128 MiB).
CPU_TILE_BYTES = 256 << 20
# Share of a GPU's free memory that score tiles (and, separately, a base) may take.
GPU_FREE_SHARE = 0.5


def torch_out_of_memory() -> type[BaseException]:
    """torch's out-of-memory error: `torch.OutOfMemoryError` is an alias of this class from
    torch 2.5 on, and this name exists on every torch the package allows."""
    import torch

    return torch.cuda.OutOfMemoryError


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether an error (torch's, whose text says so, or FAISS's) is a failed allocation."""
    text = str(exc).lower()
    return "out of memory" in text or "alloc fail" in text or "cudamalloc" in text


def faiss_reason(exc: BaseException) -> str:
    """The last line of a FAISS error: the check that failed, without the C++ location."""
    lines = str(exc).strip().splitlines()
    return lines[-1].split("Error: ")[-1] if lines else type(exc).__name__


def release_torch_cache() -> None:
    """Hand the memory torch's allocator keeps cached back to the device (a no-op without
    CUDA): GPU FAISS allocates with cudaMalloc and cannot use torch's cache, so after an
    encoder's work it would otherwise run out of memory on a GPU that is mostly idle."""
    import sys

    if "torch" not in sys.modules:  # nothing was ever allocated through torch
        return
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def free_bytes(device: torch.device) -> int:
    """Free memory on `device` (CUDA: `mem_get_info`); the fixed CPU budget elsewhere."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    return CPU_TILE_BYTES


def tile_bytes(device: torch.device) -> int:
    """How many bytes one score tile and its temporaries may take on `device`."""
    if device.type == "cuda":
        return int(free_bytes(device) * GPU_FREE_SHARE)
    return CPU_TILE_BYTES
