"""Training word vectors on a corpus's own text with gensim (word2vec or fastText).

Why here: pretrained GloVe cannot be fetched on this project's machines, and the
word-vector baselines need vectors for the words of the texts searched. gensim is the
well-kept library for this (C loops, numpy 2 wheels); it is an optional extra
(`semsearch[baselines]`). Words are cut as `WordTokenizer` cuts them, so every trained
word is one the tokenizer can look up.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pyarrow.parquet as pq

from semsearch.errors import SemsearchError
from semsearch.models.word_vectors import WordVectors

log = logging.getLogger(__name__)
Method = Literal["word2vec", "fasttext"]
METHODS: tuple[str, ...] = get_args(Method)


@dataclass(frozen=True)
class WordVectorOptions:
    """gensim's settings: skip-gram with negative sampling, as word2vec's authors advise
    for small corpora; `workers` > 1 trades exact repeatability for speed."""

    method: Method = "word2vec"
    dimension: int = 300
    window: int = 5
    min_count: int = 5
    epochs: int = 5
    workers: int = 2
    seed: int = 0


def corpus_texts(sources: Sequence[str], limit: int | None = None) -> list[str]:
    """The texts of `FILE.parquet:COLUMN[,COLUMN...]` sources, empty ones left out."""
    texts: list[str] = []
    for source in sources:
        path, _, names = source.rpartition(":")
        if not path or not names:
            raise SemsearchError(
                f"text source {source!r}: write it as FILE.parquet:COLUMN[,COLUMN]"
            )
        if not Path(path).is_file():
            raise SemsearchError(f"no such file: {path}")
        columns = names.split(",")
        schema = pq.read_schema(path)
        missing = [name for name in columns if name not in schema.names]
        if missing:
            raise SemsearchError(f"{path} has no column(s) {', '.join(missing)}")
        table = pq.read_table(path, columns=columns)
        for name in columns:
            texts += [text for text in table.column(name).to_pylist()[:limit] if text]
    return texts


def words_of(text: str) -> list[str]:
    """Lower-cased whitespace words with punctuation stripped at their ends."""
    words = (word.strip(string.punctuation) for word in text.lower().split())
    return [word for word in words if word]


def train_word_vectors(texts: Sequence[str], options: WordVectorOptions) -> WordVectors:
    """Train on `texts`; words seen fewer than `min_count` times get no vector."""
    if options.method not in METHODS:
        raise SemsearchError(
            f"unknown method {options.method!r}: choose one of {', '.join(METHODS)}"
        )
    try:
        from gensim.models import FastText, Word2Vec
    except ImportError as exc:
        raise SemsearchError(
            "training word vectors needs gensim: pip install -e '.[baselines]' in semsearch's folder"
        ) from exc
    sentences = _Sentences(texts)
    trainer = Word2Vec if options.method == "word2vec" else FastText
    model = trainer(
        sentences=sentences,
        vector_size=options.dimension,
        window=options.window,
        min_count=options.min_count,
        epochs=options.epochs,
        workers=options.workers,
        seed=options.seed,
        sg=1,
    )
    vectors = model.wv
    log.info(
        "trained %d %d-d word vectors on %d texts",
        len(vectors.index_to_key),
        options.dimension,
        len(texts),
    )
    return WordVectors(list(vectors.index_to_key), np.asarray(vectors.vectors, dtype=np.float32))


class _Sentences:
    """A re-iterable corpus: gensim passes over it once per epoch (plus the vocabulary scan)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts

    def __iter__(self) -> Iterator[list[str]]:
        for text in self.texts:
            yield words_of(text)
