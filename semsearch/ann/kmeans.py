"""IVF's k-means and list assignment through torch, for a FAISS build without GPU support.

Why: PyPI's GPU FAISS wheels are built for CUDA 12 while torch's are now CUDA 13, so the
usual install on a GPU machine has a CUDA torch and faiss-cpu. Then the
steps of an IVF build that are dense matrix products run on the GPU through the exact
k-NN (`semsearch.ann.exact`): k-means and assigning vectors to lists (FAISS then stores
them with `add_core`). Both take a torch device, so the same code runs (and is tested) on
a CPU. For inner-product metrics the k-means is spherical, as FAISS trains IVF: centroids
are renormalised after each update, so no centroid draws rows by its length alone.
"""

from __future__ import annotations

import faiss
import numpy as np
import torch

from semsearch.ann.exact import ExactSearch
from semsearch.ann.metrics import INNER_PRODUCT

KMEANS_ITERATIONS = 20


def assign(vectors: np.ndarray, centroids: np.ndarray, metric: str, device: str) -> np.ndarray:
    """The nearest centroid of each vector by `metric`, as FAISS' flat quantizer picks it."""
    return ExactSearch(centroids, metric, device).search(vectors, 1)[1][:, 0]


def kmeans(sample: np.ndarray, count: int, metric: str, device: str, seed: int = 0) -> np.ndarray:
    """`count` centroids of `sample` (Lloyd's iterations, assignment by `metric`, spherical
    for inner products, as FAISS' IVF training); an emptied centroid restarts at a random
    sample point."""
    generator = torch.Generator().manual_seed(seed)
    points = torch.from_numpy(sample).to(device)
    start = torch.randperm(len(points), generator=generator)[:count].to(device)
    centroids = points[start].clone()
    for _ in range(KMEANS_ITERATIONS):
        nearest = ExactSearch(centroids, metric, device).search_tensors(points, 1)[1][:, 0]
        nearest = nearest.to(points.device)
        sums = torch.zeros_like(centroids).index_add_(0, nearest, points)
        counts = torch.bincount(nearest, minlength=count).to(points.dtype)
        empty = counts == 0
        centroids = sums / counts.clamp(min=1)[:, None]
        if metric in INNER_PRODUCT:  # spherical, as FAISS trains IVF for inner products
            centroids = torch.nn.functional.normalize(centroids, dim=1)
        if empty.any():
            refill = torch.randint(len(points), (int(empty.sum()),), generator=generator)
            centroids[empty] = points[refill.to(device)]
    return centroids.cpu().numpy()


def train_quantizer(ivf: faiss.IndexIVF, sample: np.ndarray, metric: str, device: str) -> None:
    """k-means of `sample` on `device` into `ivf`'s empty coarse quantizer; FAISS then sees
    a trained quantizer and trains the rest itself."""
    ivf.quantizer.add(kmeans(sample, ivf.nlist, metric, device))


def add_to_lists(
    ivf: faiss.IndexIVF, vectors: np.ndarray, ids: np.ndarray, metric: str, device: str
) -> None:
    """Add prepared `vectors` under int64 `ids`: their lists chosen on `device`, the rows
    stored in them by FAISS."""
    centroids = ivf.quantizer.reconstruct_n(0, ivf.nlist)
    lists = assign(vectors, centroids, metric, device)
    ivf.add_core(
        len(vectors),
        faiss.swig_ptr(vectors),
        faiss.swig_ptr(ids),
        faiss.swig_ptr(np.ascontiguousarray(lists, dtype=np.int64)),
    )
