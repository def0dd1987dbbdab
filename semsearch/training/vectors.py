"""Ready-made sentence vectors and the labelled pairs between them, for the adapter.

Vectors come from a `.npy` file ([rows, dimension]) or from an index built by
`semsearch build` (the vectors it stores; row i is its i-th live row). Pairs
are a table (any corpus file) with the row numbers of two vectors and a 0/1 label:
columns `row1`, `row2`, `label` (others can be mapped onto these names).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semsearch.errors import SemsearchError
from semsearch.io.inputs import read_npy
from semsearch.store.folders import DEFAULT_INDEX_DIR, IndexFolder, find_index
from semsearch.store.segment import Segment
from semsearch.training.data import read_source

PAIR_COLUMNS = ("row1", "row2", "label")


@dataclass(frozen=True)
class VectorPairs:
    """Row numbers of the two sides of each pair, and 0/1 labels."""

    first: np.ndarray
    second: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def load_vectors(
    path: Path | None = None, index: str | None = None, index_dir: Path = DEFAULT_INDEX_DIR
) -> np.ndarray:
    """float32 [rows, dimension] from a `.npy` file or from an index (one of the two)."""
    if (path is None) == (index is None):
        raise SemsearchError("give either a .npy file of vectors or an index (one of them)")
    if index is not None:
        return index_vectors(find_index(index, index_dir))
    vectors = read_npy(path, "vectors", "--vectors")
    return np.ascontiguousarray(vectors, dtype=np.float32)


def index_vectors(folder: IndexFolder) -> np.ndarray:
    """Every live vector an index stores, in row order (segment after segment)."""
    manifest = folder.manifest()
    parts = []
    for record in manifest.segments:
        segment = Segment(folder.segment_dir(record.name), record)
        parts.append(segment.vectors_at(np.flatnonzero(segment.live_mask())))
    if not parts:
        return np.empty((0, manifest.model.dimension), np.float32)
    return np.concatenate(parts)


def read_vector_pairs(
    source: str, rows: int, columns: Mapping[str, str] | None = None
) -> VectorPairs:
    """Labelled pairs of vector row numbers, checked against the `rows` vectors there are."""
    data = read_source(source, columns)
    missing = [name for name in PAIR_COLUMNS if name not in data.columns]
    if missing:
        raise SemsearchError(
            f"{source} needs the column(s) {', '.join(missing)} (row numbers of two vectors and a "
            f"0/1 label), but has {', '.join(data.names)}; map one with --column NAME=FILE_COLUMN"
        )
    try:
        first, second, labels = (
            np.asarray(data.columns[name], dtype=np.float64) for name in PAIR_COLUMNS
        )
    except (TypeError, ValueError) as exc:
        raise SemsearchError(f"{source}: row1, row2 and label must be numbers ({exc})") from None
    if len(labels) == 0:
        raise SemsearchError(f"{source} has no pairs")
    for name, values in (("row1", first), ("row2", second)):
        if np.any(values != np.round(values)) or values.min() < 0 or values.max() >= rows:
            raise SemsearchError(f"{source}: {name} must hold row numbers from 0 to {rows - 1}")
    if not set(np.unique(labels)) <= {0.0, 1.0}:
        raise SemsearchError(f"{source}: label must be 0 or 1")
    return VectorPairs(first.astype(np.int64), second.astype(np.int64), labels.astype(np.float32))
