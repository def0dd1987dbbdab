"""The lexical (BM25) part of an index: one bm25s index per segment, scored with index-wide IDF.

Per segment, because a segment's files are written once: its part is built with it and
never rewritten; deleted rows are filtered by the live mask, as on the FAISS side.

Index-wide IDF, because bm25s stores eager scores from one segment's statistics: a segment
of ten added rows would see every term as common. So each query term's contribution in a
segment is multiplied by its IDF over all segments / its IDF over that segment. Deleted
rows count in the statistics until `compact`, as in Lucene. The files are bm25s' own, in
`segments/s000000/lexical-g000001/` (`file_names.LEXICAL_FILES`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semsearch.disk import temporary_for
from semsearch.errors import SemsearchError
from semsearch.store.lexical_build import write_bm25_parts
from semsearch.store.lexical_terms import bm25s_module, term_idf, tokenizer_for
from semsearch.store.manifest import LexicalSpec

log = logging.getLogger(__name__)


def tokenize(texts: Sequence[str], spec: LexicalSpec) -> list[list[str]]:
    """Lower-cased words of two or more characters, stop words dropped, stemmed: the terms a
    text is indexed and queried by."""
    return tokenizer_for(spec).tokenize(
        list(texts), update_vocab=True, return_as="string", allow_empty=False, show_progress=False
    )


def build_bm25(texts: Sequence[str], spec: LexicalSpec):
    """A bm25s index of `texts` in memory (row i is texts[i]); its vocabulary numbers the
    terms in order of first appearance, so the same texts make the same files. For small
    collections (an evaluation's corpus); a segment's part is written by `write_lexical`."""
    bm25s = bm25s_module()
    tokenizer = tokenizer_for(spec)
    ids = tokenizer.tokenize(
        list(texts), update_vocab=True, return_as="ids", allow_empty=False, show_progress=False
    )
    vocab = tokenizer.get_vocab_dict()
    if not vocab:  # no text has a word: one unused term keeps the matrices well formed
        vocab = {"": 0}
    model = bm25s.BM25(k1=spec.k1, b=spec.b, method=spec.method)
    with np.errstate(invalid="ignore", divide="ignore"):  # no text has a word: mean length 0
        model.index((ids, vocab), create_empty_token=False, show_progress=False)
    return model


def write_lexical(
    folder: Path, parts: Iterable[Sequence[str]], spec: LexicalSpec, generation: int
) -> str:
    """Index the texts `parts` yields (a segment's rows, part by part, in position order)
    into `folder`/lexical-g<N>/ through a temporary folder renamed into place, one part in
    memory at a time (`lexical_build`); the folder's name."""
    name = f"lexical-g{generation:06d}"
    final = folder / name
    shutil.rmtree(final, ignore_errors=True)  # left by a writer that died after the rename
    with temporary_for(final, folder / f".tmp-{name}") as temporary:
        shutil.rmtree(temporary, ignore_errors=True)
        write_bm25_parts(temporary, parts, spec)
    return name


@dataclass
class LexicalPart:
    """One segment's BM25 matrices (terms x documents, eager scores) and vocabulary."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    vocab: dict[str, int]
    documents: int

    @classmethod
    def read(cls, folder: Path, rows: int) -> LexicalPart:
        """Load a lexical folder; refused when it does not hold `rows` documents."""
        try:
            # Memory-mapped: a query reads its terms' postings, never the whole matrices.
            model = bm25s_module().BM25.load(folder, mmap=True, show_progress=False)
        except (OSError, ValueError, KeyError) as exc:
            raise SemsearchError(
                f"{folder} cannot be read ({type(exc).__name__}): rebuild it with "
                f"'semsearch reindex {folder.parents[2].name} --lexical', or roll back"
            ) from exc
        if model.scores["num_docs"] != rows:
            raise SemsearchError(
                f"{folder} indexes {model.scores['num_docs']} rows, the manifest says {rows}: "
                "roll back or rebuild the index"
            )
        return cls.of(model)

    @classmethod
    def of(cls, model) -> LexicalPart:
        """The part a bm25s index (`build_bm25`, or loaded) holds."""
        scores = model.scores
        return cls(
            np.asarray(scores["data"]),
            np.asarray(scores["indices"]),
            np.asarray(scores["indptr"]),
            model.vocab_dict,
            int(scores["num_docs"]),
        )

    def document_frequency(self, term: int) -> int:
        return int(self.indptr[term + 1] - self.indptr[term])

    def matches(
        self, terms: Sequence[int], weights: Sequence[float]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The documents holding any of `terms` (ascending) and each one's score: the sum over
        `terms` of weight x stored score (float64). Only the terms' postings are read, so
        memory follows the matches, not the segment's rows."""
        if not terms:
            return np.empty(0, np.int64), np.empty(0)
        spans = [(int(self.indptr[t]), int(self.indptr[t + 1])) for t in terms]
        documents = np.concatenate([self.indices[start:end] for start, end in spans])
        values = np.concatenate(
            [
                self.data[start:end] * np.float32(weight)
                for (start, end), weight in zip(spans, weights)
            ]
        )
        found, slots = np.unique(documents, return_inverse=True)
        return found.astype(np.int64), np.bincount(slots, weights=values, minlength=len(found))


@dataclass
class LexicalSegment:
    """A segment's lexical part as a search sees it: its rows start at global row `offset`."""

    part: LexicalPart
    offset: int


def lexical_search(
    segments: Sequence[LexicalSegment],
    spec: LexicalSpec,
    queries: Sequence[str],
    k: int,
    allowed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 scores and global rows of each query's best `k` `allowed` rows (-1 and NaN padded);
    rows that share no term with the query are not results."""
    all_scores = np.full((len(queries), k), np.nan, np.float32)
    all_rows = np.full((len(queries), k), -1, np.int64)
    total = sum(segment.part.documents for segment in segments)
    for number, terms in enumerate(tokenize(queries, spec)):
        found_scores, found_rows = [], []
        for segment, (ids, weights) in zip(
            segments, _segment_weights(segments, spec, terms, total)
        ):
            documents, scores = segment.part.matches(ids, weights)
            kept = (scores > 0) & allowed[segment.offset + documents]
            documents, scores = documents[kept], scores[kept]
            if len(documents) > k:
                best = np.argpartition(-scores, k - 1)[:k]
                documents, scores = documents[best], scores[best]
            found_scores.append(scores)
            found_rows.append(documents + segment.offset)
        scores, rows = np.concatenate(found_scores), np.concatenate(found_rows)
        order = np.lexsort((rows, -scores))[:k]  # best first; ties by row
        all_scores[number, : len(order)], all_rows[number, : len(order)] = (
            scores[order],
            rows[order],
        )
    return all_scores, all_rows


def _segment_weights(
    segments: Sequence[LexicalSegment], spec: LexicalSpec, terms: list[str], total: int
) -> list[tuple[list[int], list[float]]]:
    """For each segment, its ids of the query's terms and each one's IDF correction."""
    found = [[segment.part.vocab.get(term, -1) for term in terms] for segment in segments]
    frequencies = [
        [segment.part.document_frequency(i) if i >= 0 else 0 for i in ids]
        for segment, ids in zip(segments, found)
    ]
    overall = [sum(column) for column in zip(*frequencies)] if frequencies else []
    weighted = []
    for segment, ids, counts in zip(segments, found, frequencies):
        chosen, weights = [], []
        for i, count, everywhere in zip(ids, counts, overall):
            local = term_idf(spec.method, count, segment.part.documents) if i >= 0 else 0.0
            if local > 0:  # a term with no weight here contributes nothing here
                chosen.append(i)
                weights.append(term_idf(spec.method, everywhere, total) / local)
        weighted.append((chosen, weights))
    return weighted


def index_segment_texts(
    folder: Path, text_column: str, rows: int, parts: int, spec: LexicalSpec, generation: int
) -> str:
    """Write the lexical part of the segment in `folder` from its stored texts (no model
    needed); the folder's name."""
    from semsearch.store.manifest import SegmentRecord
    from semsearch.store.segment import Segment

    segment = Segment(folder, SegmentRecord(folder.name.removeprefix(".tmp-"), rows, parts, "", 0))
    texts = (
        [text or "" for text in table.column(text_column).to_pylist()]
        for table in segment.iter_metadata([text_column])
    )
    return write_lexical(folder, texts, spec, generation)
