"""FAISS on a GPU: moving an index there and back (the `gpu` extra's faiss-gpu-cu12).

Why a module of its own: GPU FAISS is optional, so every GPU FAISS call goes through here,
once `semsearch.ann.devices` has found GPU support. Indexes visit the GPU for the heavy work
only and are written as CPU indexes, so an index built on a GPU opens on any machine.
"""

from __future__ import annotations

import logging
from functools import cache

import faiss

from semsearch.ann.devices import faiss_reason, release_torch_cache

log = logging.getLogger(__name__)

# GPU FAISS selects at most this many results per query, and probes at most this many lists.
GPU_MAX_K = 2048


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
        log.info(
            "%s stays on the CPU: FAISS cannot place it on a GPU (%s)",
            type(faiss.downcast_index(index)).__name__,
            faiss_reason(exc),
        )
        return None


def to_cpu(index: faiss.Index) -> faiss.Index:
    """The CPU copy of a GPU index (what is written to disk)."""
    return faiss.index_gpu_to_cpu(index)
