"""A tiny word-vector file shared by the word-model tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from semsearch.models.word_vectors import WordVectors, write_word_vectors

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "runs", "fast", "python", "library", "guitar"]
TEXTS = ["The cat sat on the mat.", "A dog runs fast!", "python library", "Guitar, cat; dog."]


def tiny_vectors_file(folder: Path, dimension: int = 8, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(len(WORDS), dimension)).astype(np.float32)
    return write_word_vectors(WordVectors(list(WORDS), vectors), folder / "vectors.txt")
