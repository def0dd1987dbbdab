"""Exact k-nearest neighbours over vectors streamed in parts: tuning's ground truth, mining.

Why its own module: it is the one exact search of the package, and the only search that
runs on whichever device is at hand (GPU FAISS, torch on a GPU, or FAISS on the CPU),
part by part so memory stays bounded by one part whatever the collection's size.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import faiss
import numpy as np

from semsearch.index import gpu
from semsearch.index.gpu import CPU, FaissDevice
from semsearch.index.vector_index import METRICS, higher_is_better, prepare_vectors

log = logging.getLogger(__name__)


def exact_knn(
    queries: np.ndarray,
    parts: Iterable[tuple[np.ndarray, np.ndarray]],
    k: int,
    metric: str,
    device: FaissDevice = CPU,
) -> tuple[np.ndarray, np.ndarray]:
    """Scores and ids of the exact top-k of each query over (ids, vectors) parts streamed in turn.

    `queries` must come from `prepare_vectors`; parts are prepared here. Memory stays bounded
    by one part. On a GPU device each part is searched there (k up to GPU FAISS' limit),
    and on the CPU from the first part the GPU has no memory for.
    """
    heap = faiss.ResultHeap(len(queries), k, keep_max=higher_is_better(metric))
    on_gpu = (device.is_gpu and k <= gpu.GPU_MAX_K) or device.torch_device is not None
    for ids, vectors in parts:
        if len(vectors) == 0:
            continue
        vectors = prepare_vectors(vectors, metric)
        part_k = min(k, len(vectors))
        scores = None
        if on_gpu:
            try:
                if device.torch_device is not None:
                    from semsearch.index import torch_gpu  # torch only where it runs

                    scores, positions = torch_gpu.knn(queries, vectors, part_k, metric,
                                                      device.torch_device)  # fmt: skip
                else:
                    scores, positions = gpu.knn(
                        queries, vectors, part_k, METRICS[metric], device.gpu
                    )
            except (RuntimeError, MemoryError) as exc:
                if not gpu.is_out_of_memory(exc):
                    raise
                log.warning("the GPU ran out of memory in an exact search (%s): going on on "
                            "the CPU", gpu.faiss_reason(exc))  # fmt: skip
                on_gpu = False
        if scores is None:
            flat = faiss.IndexFlat(queries.shape[1], METRICS[metric])
            flat.add(vectors)
            scores, positions = flat.search(queries, part_k)
        ids = np.asarray(ids, dtype=np.int64)
        found = np.where(positions >= 0, ids[np.maximum(positions, 0)], -1)
        heap.add_result(np.ascontiguousarray(scores), np.ascontiguousarray(found))
    heap.finalize()
    return heap.D, heap.I
