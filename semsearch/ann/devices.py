"""Where vector work runs, in one place: the device choice (`FaissDevice`), out-of-memory
errors, the torch cache, and the memory an exact search may use per tile.

Why one module: `--device` is resolved here once (GPU FAISS, FAISS on the CPU with its
heavy steps on a GPU through torch, or the CPU alone); a GPU that runs out of memory is
recognised here; the torch allocator's cache is released here before GPU FAISS allocates
on the same device; and the tile budget of the exact k-NN is decided here, so backends
(`semsearch.ann.faiss_gpu`, `semsearch.ann.exact`) only ask.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import faiss

from semsearch.errors import SemsearchError

if TYPE_CHECKING:  # torch is imported where a device is used, not to read an index
    import torch

log = logging.getLogger(__name__)

INSTALL_HINT = "make setup-gpu in semsearch's folder (faiss-gpu-cu12 in place of faiss-cpu)"

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


@dataclass(frozen=True)
class FaissDevice:
    """Where FAISS works: a GPU number (GPU FAISS), or the CPU with its heaviest steps on
    `torch_device` (a FAISS build without GPU support: `semsearch.ann.kmeans` and
    `semsearch.ann.exact`), or the CPU alone."""

    gpu: int | None = None
    torch_device: str | None = None

    @property
    def is_gpu(self) -> bool:
        """Whether indexes move to a GPU (GPU FAISS)."""
        return self.gpu is not None

    @property
    def exact_device(self) -> str:
        """The torch device the exact k-NN (`semsearch.ann.exact`) runs on beside FAISS: the
        same GPU, or the CPU."""
        if self.torch_device is not None:
            return self.torch_device
        if self.gpu is None:
            return "cpu"
        import torch  # only where FAISS has a GPU

        return f"cuda:{self.gpu}" if self.gpu < torch.cuda.device_count() else "cpu"

    def __str__(self) -> str:
        if self.torch_device is not None:
            return f"{self.torch_device} (through torch)"
        return "cpu" if self.gpu is None else f"cuda:{self.gpu}"


CPU = FaissDevice()


def gpu_count() -> int:
    """CUDA devices this FAISS build can use: 0 for faiss-cpu or without a visible GPU."""
    if not hasattr(faiss, "StandardGpuResources"):
        return 0
    return int(faiss.get_num_gpus())


def faiss_device(device: str = "auto") -> FaissDevice:
    """The FAISS device for a `--device` value. `auto` takes GPU 0 when this FAISS build has
    GPU support and the machine a GPU; with a GPU but faiss-cpu, the CPU with k-means,
    list assignment and exact search on the GPU through torch; else the CPU. Each fallback
    is said once in the log. `cuda[:N]` requires a GPU."""
    if device == "cpu":
        return CPU
    if device == "auto":
        if gpu_count():
            return FaissDevice(0)
        return _without_gpu_faiss(0) or CPU
    if device != "cuda" and not device.startswith("cuda:"):
        raise SemsearchError(f"unknown device {device!r}: use auto, cpu, cuda or cuda:N")
    number = device.partition(":")[2]
    if number and not number.isdigit():
        raise SemsearchError(
            f"unknown device {device!r}: write the GPU number as cuda:0, cuda:1 ..."
        )
    gpu = int(number or 0)
    if gpu < gpu_count():
        return FaissDevice(gpu)
    placed = _without_gpu_faiss(gpu)
    if placed is None:
        raise SemsearchError(
            f"--device {device} was asked for but no CUDA GPU {gpu} is visible: use --device cpu"
        )
    return placed


def cuda_may_be_visible() -> bool:
    """Whether a CUDA GPU could be visible to this process, answered without importing torch
    (seconds): never on macOS, nor on Linux without an NVIDIA device node (WSL: /dev/dxg),
    nor where CUDA_VISIBLE_DEVICES hides every GPU. True means torch must be asked."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1"):
        return False
    if sys.platform == "darwin":
        return False
    if sys.platform.startswith("linux"):
        return any(Path("/dev").glob("nvidia[0-9]*")) or Path("/dev/dxg").exists()
    return True


def device_words(device: str) -> str:
    """`--device` as a line said before a model loads names it (torch not imported yet):
    `auto` is `cpu` where no GPU can be visible."""
    if device == "auto":
        return "a GPU if torch sees one, else the CPU" if cuda_may_be_visible() else "cpu"
    return device


def _without_gpu_faiss(gpu: int) -> FaissDevice | None:
    """FAISS on the CPU with its heavy steps on GPU `gpu` through torch, where torch sees
    that GPU; None where it does not (said once in the log either way). torch is imported
    only where a GPU may be visible (or it is loaded already, as wherever an encoder is)."""
    if "torch" not in sys.modules and not cuda_may_be_visible():
        _log_fallback(False)
        return None
    import torch

    if gpu < (torch.cuda.device_count() if torch.cuda.is_available() else 0):
        _log_fallback(True)
        return FaissDevice(torch_device=f"cuda:{gpu}")
    _log_fallback(False)
    return None


def device_report() -> dict:
    """What `--device auto` will use, for the model (torch) and for FAISS, and why: for
    `semsearch devices`, so a GPU machine can be checked before an hour-long build."""
    import torch

    gpus = (
        [
            {
                "index": number,
                "name": torch.cuda.get_device_name(number),
                "memory_gib": round(
                    torch.cuda.get_device_properties(number).total_memory / 2**30, 1
                ),
            }
            for number in range(torch.cuda.device_count())
        ]
        if torch.cuda.is_available()
        else []
    )
    has_gpu_faiss = hasattr(faiss, "StandardGpuResources")
    faiss_gpus = gpu_count()
    if faiss_gpus:
        faiss_reason_text = f"FAISS sees {faiss_gpus} GPU(s)"
    elif not has_gpu_faiss:
        faiss_reason_text = f"this FAISS build has no GPU support ({INSTALL_HINT})"
    else:
        faiss_reason_text = "FAISS has GPU support but sees no CUDA GPU"
    return {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "gpus": gpus,
        "faiss": faiss.__version__,
        "faiss_gpu_support": has_gpu_faiss,
        "faiss_gpus": faiss_gpus,
        "model_auto": "cuda:0" if gpus else "cpu",
        "faiss_auto": str(faiss_device("auto")),
        "faiss_why": faiss_reason_text,
    }


@cache
def _log_fallback(through_torch: bool) -> None:
    """One line per process on where FAISS runs when it has no GPU of its own."""
    if through_torch:
        log.info(
            "FAISS has no GPU support here: its k-means, list assignment and exact searches "
            "run on the GPU through torch, the rest on the CPU (%s for all of it)",
            INSTALL_HINT,
        )
    else:
        log.info("FAISS runs on the CPU: no CUDA GPU is visible")
