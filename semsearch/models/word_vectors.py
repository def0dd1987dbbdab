"""Word vectors in the open word2vec text format: read, checked, written, or taken from a model.

Why a format of our own reading: the baselines of issue 17 (averaged word vectors, a BiLSTM
over them) start from a plain file that any tool writes (gensim's `save_word2vec_format`,
GloVe's `.txt`, fastText's `.vec`), so semsearch reads it without those libraries. A file
that is missing, ragged or of another dimension than asked for is refused in one line.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semsearch.disk import temporary_for
from semsearch.errors import SemsearchError

# Index 0 of every vocabulary: the zero vector that pads batches and stands for a text
# with no known word (sentence-transformers' WordEmbeddings pads with index 0 as well).
PADDING_TOKEN = "<pad>"


@dataclass(frozen=True)
class WordVectors:
    """A vocabulary and its vectors, row i for `words[i]`."""

    words: list[str]
    vectors: np.ndarray  # float32 [len(words), dimension]

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def with_padding(self) -> WordVectors:
        """The same vectors behind a zero row for `PADDING_TOKEN` (once)."""
        if self.words and self.words[0] == PADDING_TOKEN:
            return self
        zero = np.zeros((1, self.dimension), dtype=np.float32)
        return WordVectors([PADDING_TOKEN, *self.words], np.vstack([zero, self.vectors]))


def read_word_vectors(path: str | Path, dimension: int | None = None) -> WordVectors:
    """Read a word2vec text file (a `count dimension` header is optional, `.gz` allowed).

    `dimension`, when given, is what the caller needs: a file of another one is refused.
    """
    path = Path(path)
    if not path.is_file():
        raise SemsearchError(
            f"no word-vector file at {path}: train one with `semsearch word-vectors`"
        )
    words: list[str] = []
    rows: list[np.ndarray] = []
    width: int | None = None
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.rstrip("\n").rstrip().split(" ")
            if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue  # the word2vec header: count and dimension
            if len(parts) < 2:
                continue  # a blank line
            width = width or len(parts) - 1
            if len(parts) - 1 != width:
                raise SemsearchError(
                    f"{path} line {number}: {len(parts) - 1} numbers where the file's first "
                    f"vector has {width}: the file is damaged or not word2vec text format"
                )
            try:
                rows.append(np.asarray(parts[1:], dtype=np.float32))
            except ValueError:
                raise SemsearchError(
                    f"{path} line {number}: not a word followed by numbers: is this a word2vec "
                    "text file (binary word2vec files are not read)?"
                ) from None
            words.append(parts[0])
    if not words:
        raise SemsearchError(f"{path} holds no word vectors")
    if dimension is not None and width != dimension:
        raise SemsearchError(
            f"{path} has {width}-dimensional word vectors but {dimension} are needed: use "
            "vectors of that dimension or leave the dimension out"
        )
    return WordVectors(words, np.vstack(rows))


def write_word_vectors(vectors: WordVectors, path: str | Path) -> Path:
    """Write word2vec text format (header, then `word v1 v2 ...`), via a temporary name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with (
        temporary_for(path, path.with_name(path.name + ".tmp")) as temporary,
        opener(temporary, "wt", encoding="utf-8") as handle,
    ):
        handle.write(f"{len(vectors.words)} {vectors.dimension}\n")
        for word, row in zip(vectors.words, vectors.vectors):
            handle.write(word + " " + " ".join(f"{value:.6g}" for value in row) + "\n")
    return path


def token_embedding_vectors(model: str = "default") -> WordVectors:
    """The input token-embedding matrix of a transformer, as word vectors.

    Only whole-word tokens are kept (no `##` word pieces, no `[CLS]`-style specials), since a
    whitespace tokenizer can only ever look up whole words.
    """
    from transformers import AutoModel

    from semsearch.models.loading import load_pretrained
    from semsearch.models.model_folder import resolve_model

    transformer, tokenizer = load_pretrained(resolve_model(model), AutoModel)
    matrix = transformer.get_input_embeddings().weight.detach().float().numpy()
    words, rows = [], []
    for token, index in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1]):
        if token.startswith("##") or token.startswith("[") or " " in token:
            continue
        words.append(token)
        rows.append(index)
    return WordVectors(words, matrix[rows].astype(np.float32))
