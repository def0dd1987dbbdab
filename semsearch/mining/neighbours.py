"""Every text's nearest neighbours inside its own collection, through FAISS, in chunks.

Up to AUTO_EXACT_LIMIT vectors the search is exact (Flat). Above it, it uses the trained
structure of the index the vectors came from, or an IVF index trained on the spot, so the
cost grows about linearly with the collection instead of quadratically.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import faiss
import numpy as np
from tqdm.auto import tqdm

from semsearch.index.factory import (
    AUTO_EXACT_LIMIT,
    METRICS,
    apply_search_params,
    choose_index,
    create_index,
    training_rows,
)

# Trained structures with inverted lists can be emptied and refilled with some of their rows.
REFILLABLE = ("IVF",)


@dataclass(frozen=True)
class Neighbours:
    """One chunk of queries (positions `start`…) and their neighbours' positions and scores."""

    start: int
    positions: np.ndarray
    scores: np.ndarray


def search_structure(
    vectors: np.ndarray,
    metric: str,
    trained: tuple[faiss.Index, dict[str, int], str] | None = None,
    nprobe: int | None = None,
) -> tuple[faiss.Index, str]:
    """A FAISS index over `vectors` to search them with, and a few words on what it is.

    `trained` is the index the vectors were read from (its object, search parameters and
    factory string). Unless it is a brute-force Flat index, it is reused as is when it holds
    exactly these vectors, and an IVF one is emptied and refilled when it holds more (it is
    modified: pass a copy to keep the original).
    """
    rows, dimension = vectors.shape
    if rows <= AUTO_EXACT_LIMIT:
        exact = faiss.IndexFlat(dimension, METRICS[metric])
        exact.add(vectors)
        return exact, "Flat (exact)"
    params = {"nprobe": nprobe} if nprobe is not None else {}
    if trained is not None and not isinstance(faiss.downcast_index(trained[0]), faiss.IndexFlat):
        index, own_params, factory = trained
        if index.ntotal == rows:
            apply_search_params(index, {**own_params, **params})
            return index, f"{factory} (the index's own)"
        if factory.startswith(REFILLABLE):
            index.reset()  # keeps the trained centroids (and codebooks), drops the vectors
            index.add(vectors)
            apply_search_params(index, {**own_params, **params})
            return index, f"{factory} (the index's own, refilled with {rows} rows)"
    return _train_ivf(vectors, metric, params)


def search_in_chunks(
    index: faiss.Index, vectors: np.ndarray, k: int, chunk: int, show_progress: bool = False
) -> Iterator[Neighbours]:
    """The `k` nearest other rows of every row, `chunk` query rows at a time."""
    k = min(k, len(vectors) - 1)
    with tqdm(total=len(vectors), desc="searching", unit="text", disable=not show_progress) as bar:
        for start in range(0, len(vectors), chunk):
            queries = vectors[start : start + chunk]
            # One extra neighbour: each row normally finds itself first.
            scores, positions = index.search(queries, k + 1)
            yield Neighbours(start, _without_self(positions, start, k), scores)
            bar.update(len(queries))


def _without_self(positions: np.ndarray, start: int, k: int) -> np.ndarray:
    """`positions` with the query itself, missing results and any (k+1)-th neighbour set to -1."""
    own = np.arange(start, start + len(positions))[:, None]
    valid = (positions >= 0) & (positions != own)
    valid &= np.cumsum(valid, axis=1) <= k
    return np.where(valid, positions, -1)


def _train_ivf(vectors: np.ndarray, metric: str, params: dict[str, int]) -> tuple[faiss.Index, str]:
    spec = choose_index("ivf", len(vectors), vectors.shape[1], metric)
    index = create_index(spec, vectors.shape[1])
    sample = np.random.default_rng(0).choice(
        len(vectors), size=training_rows(index, len(vectors)), replace=False
    )
    index.train(vectors[np.sort(sample)])
    index.add(vectors)
    apply_search_params(index, {**spec.search_params, **params})
    return index, f"{spec.factory} (trained for mining)"
