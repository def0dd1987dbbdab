"""`make_word_model`: a new (untrained) word-vector model folder, a bi-encoder over word vectors.

Why a module of its own: it makes a `BiEncoder`, which loads and saves word-vector folders
through `word_model`; here, above both, neither has to import the other's caller.
"""

from __future__ import annotations

from pathlib import Path

import torch

from semsearch.errors import SemsearchError
from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.pooling import Pooling
from semsearch.models.word_encoder import WordNetwork, WordTokenizer
from semsearch.models.word_model import WORD_POOLINGS, WordModelOptions
from semsearch.models.word_vectors import read_word_vectors


def make_word_model(
    vectors_file: str | Path, folder: str | Path, options: WordModelOptions
) -> Path:
    """Write a new (untrained) word-vector model folder; returns the folder."""
    if options.pooling not in WORD_POOLINGS:
        raise SemsearchError(
            f"unknown pooling {options.pooling!r} for a word-vector model: choose one of "
            f"{', '.join(WORD_POOLINGS)}"
        )
    if options.layer.kind == "cnn" and any(size % 2 == 0 for size in options.layer.kernel_sizes):
        raise SemsearchError("CNN kernel sizes must be odd, so that every word keeps one output")
    vectors = read_word_vectors(vectors_file, options.dimension).with_padding()
    torch.manual_seed(options.seed)
    try:
        network = WordNetwork(
            torch.from_numpy(vectors.vectors), options.layer, options.update_embeddings
        )
    except ValueError as exc:
        raise SemsearchError(str(exc)) from exc
    encoder = BiEncoder(
        transformer=network,
        tokenizer=WordTokenizer(vectors.words, options.stop_words),
        pooling=Pooling(options.pooling),  # type: ignore[arg-type]
        normalize=options.normalize,
        max_length=options.max_length,
        name=str(folder),
    )
    encoder.save(folder)
    return Path(folder)
