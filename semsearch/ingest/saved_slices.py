"""A part encoded in slices of about `SAVE_EVERY` texts, each slice's vectors saved as it
finishes, so that an interrupted build (Ctrl-C, SIGTERM, a full disk, a crash) redoes at
most one slice of the part it was encoding, not the whole part.

Why slices of the part's length order, and parts kept at 16,384 rows: the encoder pads
each batch to its longest text, so texts are sorted by token length before batching. Cut
into consecutive runs of that order, the slices hold the very batches the whole part would
(20,000 PyPI summaries: 2.4% padding at 64 texts a batch, 10.5% at the GPU's 256), where
parts of 2,048 rows sorted apiece pad 10.9% and 46%; and an index of eight times as many
parts opens slower. A slice is the same rows on every run (a stable sort of the same
tokens), and the saved file names its rows, so a resumed build encodes exactly the rest.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from semsearch.models.encoder import TokenizedTexts
from semsearch.store.file_names import SLICES_DIR

log = logging.getLogger(__name__)

# Texts encoded between two saves: what an interruption loses at most (with a larger
# --batch-size, one batch).
SAVE_EVERY = 2048


class SavedSlices:
    """The slices of one part encoded so far: each its row positions in the part (after
    the part is sorted by id) and their vectors, in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def of_part(cls, segment_folder: Path, part: int) -> SavedSlices:
        return cls(segment_folder / SLICES_DIR / f"part-{part:05d}")

    def files(self) -> list[Path]:
        return sorted(self.folder.glob("slice-[0-9]*.npz")) if self.folder.is_dir() else []

    def load(self, rows: int, dimension: int) -> tuple[np.ndarray, np.ndarray]:
        """The positions and vectors saved for a part of `rows` rows; a file that does not
        fit it (another build's, or unreadable) is left out, and its rows encoded again."""
        positions, vectors = [np.empty(0, np.int64)], [np.empty((0, dimension), np.float32)]
        for path in self.files():
            try:
                with np.load(path) as saved:
                    where, found = saved["positions"], saved["vectors"]
            except (OSError, ValueError, KeyError):
                log.info("ignoring the unreadable saved slice %s", path)
                continue
            if found.shape != (len(where), dimension) or (len(where) and where.max() >= rows):
                log.info("ignoring the saved slice %s: it is not this part's", path)
                continue
            positions.append(where.astype(np.int64))
            vectors.append(found.astype(np.float32))
        return np.concatenate(positions), np.concatenate(vectors)

    def save(self, positions: np.ndarray, vectors: np.ndarray) -> None:
        """One more slice, under a temporary name renamed into place: a file here is whole."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"slice-{len(self.files()):05d}.npz"
        temporary = path.with_name(f".{path.stem}.tmp.npz")
        np.savez(temporary, positions=positions, vectors=vectors)
        os.replace(temporary, path)

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def remove_slices(segment_folder: Path) -> None:
    """Remove what is left of the saved slices, once every part is complete."""
    shutil.rmtree(segment_folder / SLICES_DIR, ignore_errors=True)


def encode_in_slices(
    encode: Callable[[Sequence[str]], np.ndarray],
    texts: Sequence[str],
    dimension: int,
    saved: SavedSlices,
    slice_rows: int = SAVE_EVERY,
) -> np.ndarray:
    """The vectors of `texts` in input order: those `saved` holds already, the others
    encoded by `encode` a slice of `slice_rows` at a time (the longest texts first, as the
    encoder would batch them) and saved as each finishes."""
    done, done_vectors = saved.load(len(texts), dimension)
    vectors = np.empty((len(texts), dimension), np.float32)
    vectors[done] = done_vectors
    todo = np.ones(len(texts), bool)
    todo[done] = False
    order = np.argsort(-_lengths(texts), kind="stable")
    order = order[todo[order]]
    for start in range(0, len(order), slice_rows):
        rows = np.sort(order[start : start + slice_rows])
        found = encode(_subset(texts, rows))
        vectors[rows] = found
        saved.save(rows, found)
    return vectors


def _lengths(texts: Sequence[str]) -> np.ndarray:
    """Token counts where the texts carry their tokens, else characters."""
    if isinstance(texts, TokenizedTexts):
        return np.fromiter(map(len, texts.token_ids), np.int64, count=len(texts))
    return np.fromiter(map(len, texts), np.int64, count=len(texts))


def _subset(texts: Sequence[str], rows: np.ndarray) -> Sequence[str]:
    chosen = [texts[row] for row in rows]
    if isinstance(texts, TokenizedTexts):
        return TokenizedTexts(chosen, [texts.token_ids[row] for row in rows])
    return chosen
