"""A similarity heat-map of a few sentences: the quickest look at what a model groups."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from semsearch.evaluation.base import TextEncoder
from semsearch.evaluation.similarity import normalize_rows
from semsearch.models.prompts import encode_queries

LABEL_CHARACTERS = 40
ANNOTATE_UP_TO = 20  # cells carry their value when there are at most this many sentences


def similarity_heatmap(
    encoder: TextEncoder, sentences: Sequence[str], path: str | Path, title: str = ""
) -> np.ndarray:
    """Write a PNG of the cosine similarity of every pair of `sentences`; return the matrix."""
    if len(sentences) < 2:
        raise ValueError("a heat-map needs at least two sentences")
    vectors = normalize_rows(encode_queries(encoder, list(sentences)).astype(np.float64))
    matrix = vectors @ vectors.T
    plot_heatmap(matrix, sentences, path, title)
    return matrix


def plot_heatmap(
    matrix: np.ndarray, labels: Sequence[str], path: str | Path, title: str = ""
) -> None:
    """Draw a square similarity matrix with shortened sentences as row and column labels."""
    # A bare Figure renders with Agg and touches no global pyplot state, so it is safe in
    # a server or a test run without a display.
    from matplotlib.figure import Figure

    size = 2 + 0.45 * len(labels)
    figure = Figure(figsize=(size + 3, size), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(matrix, cmap="viridis", vmin=min(0.0, float(matrix.min())), vmax=1.0)
    figure.colorbar(image, ax=axes, label="cosine similarity")
    short = [_shorten(label) for label in labels]
    axes.set_xticks(range(len(short)), short, rotation=60, ha="right", fontsize=8)
    axes.set_yticks(range(len(short)), short, fontsize=8)
    if len(labels) <= ANNOTATE_UP_TO:
        for (row, column), value in np.ndenumerate(matrix):
            colour = "black" if value > 0.6 else "white"
            axes.text(
                column, row, f"{value:.2f}", ha="center", va="center", fontsize=7, color=colour
            )
    if title:
        axes.set_title(title)
    # Drawn to a temporary name and renamed, so a failed or interrupted run leaves no
    # half-written picture under the name asked for.
    path = Path(path)
    partial = path.with_name(f".{path.stem}.partial{path.suffix}")
    figure.savefig(partial, dpi=120)
    os.replace(partial, path)


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LABEL_CHARACTERS else text[: LABEL_CHARACTERS - 1] + "…"
