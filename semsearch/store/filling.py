"""Filling a FAISS structure from stored vectors: sample, train, add part by part.

Build, add, reindex and compact all make their segments' indexes here, from the vectors on
disk, so no step needs the model.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from semsearch.ann.base import RereadableParts
from semsearch.ann.devices import CPU, FaissDevice, faiss_reason
from semsearch.ann.factory import IndexSpec
from semsearch.ann.vector_index import VectorIndex
from semsearch.errors import SemsearchError
from semsearch.store.folders import IndexFolder

log = logging.getLogger(__name__)


def sample_vectors(
    parts: RereadableParts, count: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`count` (ids, float32 vectors) drawn uniformly without replacement from all parts."""
    sizes = np.array([len(ids) for ids, _ in parts()], dtype=np.int64)
    total = int(sizes.sum())
    chosen = np.sort(
        np.random.default_rng(seed).choice(total, size=min(count, total), replace=False)
    )
    starts = np.concatenate([[0], np.cumsum(sizes)])
    ids_out, vectors_out = [], []
    for position, (ids, vectors) in enumerate(parts()):
        inside = chosen[(chosen >= starts[position]) & (chosen < starts[position + 1])]
        if len(inside):
            local = inside - starts[position]
            ids_out.append(np.asarray(ids[local]))
            vectors_out.append(np.asarray(vectors[local], dtype=np.float32))
    if not ids_out:
        return np.empty(0, np.int64), np.empty((0, 0), np.float32)
    return np.concatenate(ids_out), np.concatenate(vectors_out)


def trained_index(
    spec: IndexSpec,
    dimension: int,
    parts: RereadableParts,
    total: int,
    folder: IndexFolder,
    generation: int,
    device: FaissDevice = CPU,
) -> tuple[VectorIndex, IndexSpec]:
    """An empty index of `spec`, trained (on `device`) on a sample of the parts when its
    structure needs it, and the spec naming the trained copy kept in `folder` for segments
    added later."""
    index = VectorIndex.create(spec, dimension)
    sample_size = index.training_rows(total)
    if not sample_size:
        return index, replace(spec, trained_file=None)
    log.info("training %s on %d of %d vectors", spec.factory, sample_size, total)
    try:
        with index.placed(device):
            index.train(sample_vectors(parts, sample_size)[1])
    except RuntimeError as exc:  # FAISS' own checks, e.g. fewer points than centroids
        raise SemsearchError(
            f"FAISS cannot train {spec.factory} on {sample_size} vectors ({faiss_reason(exc)}): "
            "choose another index type"
        ) from exc
    name = f"t-g{generation:06d}.faiss"
    folder.trained_path(name).parent.mkdir(exist_ok=True)
    index.write(folder.trained_path(name))
    return index, replace(spec, trained_file=name)


def add_parts(
    index: VectorIndex, parts: RereadableParts, total: int, show_progress: bool = False
) -> None:
    """Add every (ids, vectors) part to `index`, with a progress bar."""
    from tqdm.auto import tqdm  # here: a query, which imports this module, never needs it

    with tqdm(total=total, desc="indexing", unit="vec", disable=not show_progress) as bar:
        for ids, vectors in parts():
            try:
                index.add(np.asarray(vectors, dtype=np.float32), ids)
            except RuntimeError as exc:  # FAISS' own checks, e.g. a graph that needs more rows
                raise SemsearchError(
                    f"FAISS cannot add {len(ids)} vectors to this index ({faiss_reason(exc)}): "
                    "choose another index type"
                ) from exc
            bar.update(len(ids))
