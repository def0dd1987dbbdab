"""FAISS's heaviest steps on a GPU through torch, for a FAISS build without GPU support.

Why: PyPI's GPU FAISS wheels are built for CUDA 12 while torch's are now CUDA 13, so the
usual `pip install semsearch` on a GPU machine has a CUDA torch and faiss-cpu. Then the
steps that are dense matrix products run here on the GPU: IVF k-means, assigning vectors
to lists (FAISS then stores them with `add_core`), and exact k-nearest-neighbour search
(tuning's ground truth, mining). Lists are still scanned by FAISS on the CPU. Every
function takes a torch device, so the same code runs (and is tested) on a CPU.
"""

from __future__ import annotations

import numpy as np
import torch

# Query rows per matrix product: a [rows, n] score matrix in float32 (1024 x 1M: 4 GiB).
QUERY_CHUNK = 1024
KMEANS_ITERATIONS = 20


def _scores(queries: torch.Tensor, vectors: torch.Tensor, metric: str) -> torch.Tensor:
    """Higher is nearer: inner products, or negated (squared L2 / L1) distances."""
    if metric in ("cosine", "dot"):
        return queries @ vectors.T
    if metric == "manhattan":
        return -torch.cdist(queries, vectors, p=1)
    squared = (queries * queries).sum(1, keepdim=True) - 2 * queries @ vectors.T
    return -(squared + (vectors * vectors).sum(1)[None, :])


def _to_faiss_scores(nearness: torch.Tensor, metric: str) -> torch.Tensor:
    """FAISS' own scale: inner products, squared L2 or L1 distances."""
    return nearness if metric in ("cosine", "dot") else -nearness


def knn(queries: np.ndarray, vectors: np.ndarray, k: int, metric: str,
        device: str) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Exact top-k (scores on FAISS' scale, positions) of prepared `queries` among prepared
    `vectors`, computed on `device` a chunk of queries at a time."""
    base = torch.from_numpy(vectors).to(device)
    k = min(k, len(vectors))
    scores = np.empty((len(queries), k), np.float32)
    positions = np.empty((len(queries), k), np.int64)
    for start in range(0, len(queries), QUERY_CHUNK):
        chunk = torch.from_numpy(queries[start : start + QUERY_CHUNK]).to(device)
        best, where = _scores(chunk, base, metric).topk(k, dim=1)
        scores[start : start + len(chunk)] = _to_faiss_scores(best, metric).cpu().numpy()
        positions[start : start + len(chunk)] = where.cpu().numpy()
    return scores, positions


def assign(vectors: np.ndarray, centroids: np.ndarray, metric: str, device: str) -> np.ndarray:
    """The nearest centroid of each vector by `metric`, as FAISS' flat quantizer picks it."""
    return knn(vectors, centroids, 1, metric, device)[1][:, 0]


def kmeans(sample: np.ndarray, count: int, metric: str, device: str, seed: int = 0) -> np.ndarray:
    """`count` centroids of `sample` (Lloyd's iterations, assignment by `metric`, as FAISS'
    IVF training does); an emptied centroid restarts at a random sample point."""
    generator = torch.Generator().manual_seed(seed)
    points = torch.from_numpy(sample).to(device)
    start = torch.randperm(len(points), generator=generator)[:count].to(device)
    centroids = points[start].clone()
    for _ in range(KMEANS_ITERATIONS):
        nearest = torch.cat([
            _scores(points[low : low + QUERY_CHUNK], centroids, metric).argmax(dim=1)
            for low in range(0, len(points), QUERY_CHUNK)
        ])  # fmt: skip
        sums = torch.zeros_like(centroids).index_add_(0, nearest, points)
        counts = torch.bincount(nearest, minlength=count).to(points.dtype)
        empty = counts == 0
        centroids = sums / counts.clamp(min=1)[:, None]
        if empty.any():
            refill = torch.randint(len(points), (int(empty.sum()),), generator=generator)
            centroids[empty] = points[refill.to(device)]
    return centroids.cpu().numpy()
