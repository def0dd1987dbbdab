"""How each similarity metric maps onto FAISS's two: inner product and L2.

Why a module of its own: the backends (`base.py`), exact k-NN (`exact.py`) and k-means all
need these conventions, and the interface module must not import exact search to get them.
"""

from __future__ import annotations

import faiss
import numpy as np

INNER_PRODUCT = ("cosine", "dot")  # metrics FAISS scores by inner product (higher is nearer)
METRICS = {  # each metric's FAISS metric type
    "cosine": faiss.METRIC_INNER_PRODUCT,
    "dot": faiss.METRIC_INNER_PRODUCT,
    "l2": faiss.METRIC_L2,
    "manhattan": faiss.METRIC_L1,
}


def prepare_vectors(vectors: np.ndarray, metric: str) -> np.ndarray:
    """Float32, C-contiguous, and unit length for cosine, as FAISS' inner product expects."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if metric == "cosine":
        vectors = vectors.copy()
        faiss.normalize_L2(vectors)
    return vectors


def higher_is_better(metric: str) -> bool:
    return metric in INNER_PRODUCT
