"""The four similarity functions that STS and pair evaluations report side by side."""

from __future__ import annotations

import numpy as np


def paired_similarities(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """Row-wise similarity of a[i] and b[i] under each function; distances are negated so
    that higher always means more similar."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    return {
        "cosine": row_cosines(a, b),
        "dot": (a * b).sum(axis=1),
        "euclidean": -np.linalg.norm(a - b, axis=1),
        "manhattan": -np.abs(a - b).sum(axis=1),
    }


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Unit-length rows; an all-zero row stays zero instead of becoming NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of a[i] and b[i] for each row: how closely two encoders (or precisions, or
    devices) agree on the same texts' vectors."""
    a, b = a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)
    return (normalize_rows(a) * normalize_rows(b)).sum(axis=1)
