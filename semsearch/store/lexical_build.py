"""Writing a segment's BM25 part part by part, in bounded memory, in bm25s' own files.

Why not `bm25s.BM25.index`: it takes every text's token list at once (about 100 bytes a
token) and sorts every (term, document) pair in memory. Here two passes write the same
files: the first tokenises each part (one tokenizer, so terms are numbered as bm25s numbers
them), keeps document lengths and term frequencies and spills the part's (term, count)
pairs to disk; the second scores them exactly as bm25s does and scatters them into the
memory-mapped output columns. Memory: one part, the vocabulary and the document lengths.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from semsearch.store.file_names import LEXICAL_FILES
from semsearch.store.lexical_terms import bm25s_module, term_idf, tokenizer_for
from semsearch.store.manifest import LexicalSpec

DATA_FILE, INDICES_FILE, INDPTR_FILE, VOCAB_FILE, PARAMS_FILE = LEXICAL_FILES


def write_bm25_parts(folder: Path, parts: Iterable[Sequence[str]], spec: LexicalSpec) -> None:
    """Write into `folder` the bm25s index of the texts `parts` yields (documents numbered
    in that order), the files `bm25s.BM25(...).index(...).save(folder)` would write."""
    folder.mkdir(parents=True, exist_ok=True)
    spill = folder / ".pairs"
    spill.mkdir(exist_ok=True)
    tokenizer = tokenizer_for(spec)
    lengths, frequencies, pair_counts = _spill_pairs(tokenizer, parts, spill)
    vocab = tokenizer.get_vocab_dict() or {"": 0}  # no word anywhere: one unused term
    frequencies = np.pad(frequencies, (0, len(vocab) - len(frequencies)))
    documents = len(lengths)
    with np.errstate(invalid="ignore", divide="ignore"):  # no document: mean of nothing
        average = np.array(lengths, dtype=np.int64).mean() if documents else np.float64("nan")
    idf = _idf_array(spec.method, frequencies, documents)
    indptr = np.zeros(len(vocab) + 1, np.int64)
    np.cumsum(frequencies, out=indptr[1:])
    pairs = int(indptr[-1])
    data = np.lib.format.open_memmap(folder / DATA_FILE, "w+", np.float32, (pairs,))
    indices = np.lib.format.open_memmap(folder / INDICES_FILE, "w+", np.int32, (pairs,))
    heads = indptr[:-1].copy()  # where each term's next document goes
    first_document = 0
    for number, per_document in enumerate(pair_counts):
        terms = np.load(spill / f"{number}.terms.npy")
        counts = np.load(spill / f"{number}.counts.npy")
        document = np.repeat(np.arange(len(per_document)), per_document)
        part_lengths = lengths[first_document : first_document + len(per_document)]
        scores = _scores(spec, idf, terms, counts, part_lengths[document], average)
        if len(terms):
            target = _slots(terms, heads)
            data[target], indices[target] = scores, document + first_document
        first_document += len(per_document)
    data.flush()
    indices.flush()
    del data, indices
    np.save(folder / INDPTR_FILE, indptr)
    shutil.rmtree(spill)
    _write_vocab_and_params(folder, vocab, spec, documents)


def _spill_pairs(
    tokenizer, parts: Iterable[Sequence[str]], spill: Path
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The first pass: tokenise each part, spill its (term, count) pairs to `spill`; every
    document's length, each term's document frequency, each part's pairs per document."""
    lengths, frequencies, pair_counts = [], np.zeros(0, np.int64), []
    for number, texts in enumerate(parts):
        tokens = tokenizer.tokenize(
            list(texts), update_vocab=True, return_as="ids", allow_empty=False, show_progress=False
        )
        terms, counts, per_document = _term_counts(tokens)
        lengths.append(np.fromiter(map(len, tokens), np.int32, len(tokens)))
        vocabulary = len(tokenizer.get_vocab_dict())
        frequencies = np.pad(frequencies, (0, max(vocabulary - len(frequencies), 0)))
        frequencies += np.bincount(terms, minlength=len(frequencies))
        np.save(spill / f"{number}.terms.npy", terms)
        np.save(spill / f"{number}.counts.npy", counts)
        pair_counts.append(per_document)
    return np.concatenate(lengths) if lengths else np.zeros(0, np.int32), frequencies, pair_counts


def _write_vocab_and_params(folder: Path, vocab: dict, spec: LexicalSpec, documents: int) -> None:
    """bm25s' vocabulary and parameter files, as its own `save` writes them."""
    from bm25s.utils import json_functions  # bm25s' own writer (orjson where present)

    (folder / VOCAB_FILE).write_text(
        json_functions.dumps(vocab, ensure_ascii=False), encoding="utf-8"
    )
    params = {
        "k1": spec.k1,
        "b": spec.b,
        "delta": 0.5,
        "method": spec.method,
        "idf_method": spec.method,
        "dtype": "float32",
        "int_dtype": "int32",
        "num_docs": documents,
        "version": bm25s_module().__version__,
        "backend": "numpy",
    }
    (folder / PARAMS_FILE).write_text(json.dumps(params, indent=4), encoding="utf-8")


def _term_counts(tokens: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each document's distinct terms and their counts (in the order bm25s' Counter keeps:
    first appearance), flattened, and how many distinct terms each document has."""
    terms, counts, per_document = [], [], np.zeros(len(tokens), np.int64)
    for position, document in enumerate(tokens):
        seen: dict[int, int] = {}
        for term in document:
            seen[term] = seen.get(term, 0) + 1
        terms.extend(seen)
        counts.extend(seen.values())
        per_document[position] = len(seen)
    return np.array(terms, np.int32), np.array(counts, np.float32), per_document


def _slots(terms: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Where each (term, document) pair of a part goes in the term-major columns, documents
    in order within a term; moves each term's `heads` past the part's pairs."""
    order = np.argsort(terms, kind="stable")
    sorted_terms = terms[order]
    starts = np.flatnonzero(np.r_[True, sorted_terms[1:] != sorted_terms[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    slots = np.empty(len(terms), np.int64)
    slots[order] = heads[sorted_terms] + np.arange(len(order)) - np.repeat(starts, sizes)
    heads[sorted_terms[starts]] += sizes  # each term once: no repeated index
    return slots


def _idf_array(method: str, frequencies: np.ndarray, documents: int) -> np.ndarray:
    """bm25s' IDF of each term (float32; 0 for a term in no document)."""
    idf = np.zeros(len(frequencies), np.float32)
    for term in np.flatnonzero(frequencies):
        idf[term] = term_idf(method, int(frequencies[term]), documents)
    return idf


def _scores(
    spec: LexicalSpec,
    idf: np.ndarray,
    terms: np.ndarray,
    counts: np.ndarray,
    lengths: np.ndarray,
    average: np.float64,
) -> np.ndarray:
    """bm25s' eager score of each (term, count) pair, with the same float types it uses (so
    the same float32 values): counts float32, the length norm float64."""
    k1, b = spec.k1, spec.b
    norm = k1 * ((1 - b) + b * lengths.astype(np.int64) / average)
    if spec.method == "atire":
        frequency_part = (counts * (k1 + 1)) / (counts + k1 * (1 - b + b * lengths / average))
    else:  # robertson, lucene
        frequency_part = counts / (norm + counts)
    return (idf[terms] * frequency_part).astype(np.float32)
