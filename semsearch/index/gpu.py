"""FAISS on a GPU: which device, and moving an index there and back.

Why a module of its own: GPU FAISS is optional (the `gpu` extra installs faiss-gpu-cu12
in place of faiss-cpu), so every GPU call goes through here, behind a check that this
FAISS build has GPU support and a CUDA device is visible. Indexes only visit the GPU for
the heavy work (k-means training, adding, tuning and mining searches) and are always
written as CPU indexes, so an index built on a GPU opens on any machine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache

import faiss

from semsearch.ann.devices import faiss_reason, release_torch_cache
from semsearch.errors import SemsearchError

log = logging.getLogger(__name__)

# GPU FAISS selects at most this many results per query, and probes at most this many lists.
GPU_MAX_K = 2048
INSTALL_HINT = "pip install 'semsearch[gpu]' (faiss-gpu-cu12 in place of faiss-cpu)"


@dataclass(frozen=True)
class FaissDevice:
    """Where FAISS works: a GPU number (GPU FAISS), or the CPU with its heaviest steps on
    `torch_device` (a FAISS build without GPU support, `semsearch.index.torch_gpu`), or
    the CPU alone."""

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
        raise SemsearchError(f"--device {device} was asked for but no CUDA GPU {gpu} is visible: "
                             "use --device cpu")  # fmt: skip
    return placed


def _without_gpu_faiss(gpu: int) -> FaissDevice | None:
    """FAISS on the CPU with its heavy steps on GPU `gpu` through torch, where torch sees
    that GPU; None where it does not (said once in the log either way)."""
    import torch  # already loaded wherever an encoder is

    if gpu < (torch.cuda.device_count() if torch.cuda.is_available() else 0):
        _log_fallback(True)
        return FaissDevice(torch_device=f"cuda:{gpu}")
    _log_fallback(False)
    return None


def device_report() -> dict:
    """What `--device auto` will use, for the model (torch) and for FAISS, and why: for
    `semsearch devices`, so a GPU machine can be checked before an hour-long build."""
    import torch

    gpus = [
        {"index": number, "name": torch.cuda.get_device_name(number),
         "memory_gib": round(torch.cuda.get_device_properties(number).total_memory / 2**30, 1)}
        for number in range(torch.cuda.device_count())
    ] if torch.cuda.is_available() else []  # fmt: skip
    has_gpu_faiss = hasattr(faiss, "StandardGpuResources")
    faiss_gpus = gpu_count()
    if faiss_gpus:
        faiss_reason_text = f"FAISS sees {faiss_gpus} GPU(s)"
    elif not has_gpu_faiss:
        faiss_reason_text = f"this FAISS build has no GPU support ({INSTALL_HINT})"
    else:
        faiss_reason_text = "FAISS has GPU support but sees no CUDA GPU"
    return {
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "gpus": gpus,
        "faiss": faiss.__version__, "faiss_gpu_support": has_gpu_faiss, "faiss_gpus": faiss_gpus,
        "model_auto": "cuda:0" if gpus else "cpu",
        "faiss_auto": str(faiss_device("auto")), "faiss_why": faiss_reason_text,
    }  # fmt: skip


@cache
def _log_fallback(through_torch: bool) -> None:
    """One line per process on where FAISS runs when it has no GPU of its own."""
    if through_torch:
        log.info("FAISS has no GPU support here: its k-means, list assignment and exact searches "
                 "run on the GPU through torch, the rest on the CPU (%s for all of it)", INSTALL_HINT)  # fmt: skip
    else:
        log.info("FAISS runs on the CPU: no CUDA GPU is visible")


@cache
def resources(gpu: int):
    """One `StandardGpuResources` per GPU and process: it holds the GPU's scratch memory."""
    return faiss.StandardGpuResources()


def to_gpu(index: faiss.Index, gpu: int) -> faiss.Index | None:
    """A copy of `index` on GPU `gpu`, or None (logged) for structures FAISS has no GPU
    version of (HNSW, some product quantizers): those stay on the CPU.

    This is where device work passes from torch (the encoder) to GPU FAISS, so torch's
    cached memory is released first: FAISS cannot allocate from it."""
    release_torch_cache()
    options = faiss.GpuClonerOptions()
    options.indicesOptions = faiss.INDICES_64_BIT  # the index's own int64 ids
    try:
        return faiss.index_cpu_to_gpu(resources(gpu), gpu, index, options)
    except RuntimeError as exc:
        log.info("%s stays on the CPU: FAISS cannot place it on a GPU (%s)",
                 type(faiss.downcast_index(index)).__name__, faiss_reason(exc))  # fmt: skip
        return None


def to_cpu(index: faiss.Index) -> faiss.Index:
    """The CPU copy of a GPU index (what is written to disk)."""
    return faiss.index_gpu_to_cpu(index)


def is_gpu_index(index: faiss.Index) -> bool:
    """Whether `index` (or the index inside its id map) lives on a GPU."""
    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexIDMap | faiss.IndexIDMap2):
        index = faiss.downcast_index(index.index)
    return type(index).__name__.startswith("Gpu")
