"""A chunked index mined as documents: one vector a document, pooled from its passages.

Why: pairing passages ranks boilerplate first, since the same stock paragraph ("This package
contains the shared library.") in hundreds of documents pairs them all at 1.0. Here a
document's vector is the mean of its passage vectors, each weighted by one over the number
of documents that hold the same passage text: a passage many documents share says little
about any of them, while documents made of the same passages (one program packaged for
several machines) still pair. The passages reported for a pair are the two that add most to
its score.
"""

from __future__ import annotations

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semsearch.mining.collection import Collection, IndexedCollection

# Passage vectors read and pooled at a time: bounds the [block, d] array, not the index.
POOL_BLOCK = 65_536
TIE_DECIMALS = 5


class DocumentCollection(Collection):
    """The documents of a chunked index: ids, passages joined as the text, pooled vectors."""

    def __init__(self, passages: IndexedCollection) -> None:
        encoded = pc.dictionary_encode(passages.ids)
        documents = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        count = len(encoded.dictionary)
        order = np.argsort(documents, kind="stable")  # each document's passages, in order
        offsets = np.concatenate([[0], np.cumsum(np.bincount(documents, minlength=count))])
        lists = pa.LargeListArray.from_arrays(
            pa.array(offsets, pa.int64()), passages.texts.take(pa.array(order))
        )
        super().__init__(
            name=passages.name,
            texts=pc.binary_join(lists, pa.scalar("\n", pa.large_string())),  # exact copies
            ids=encoded.dictionary,
            metric=passages.metric,
        )
        self.passages = passages
        self.passage_documents = documents
        self.passage_order = order
        self.passage_offsets = offsets
        self.weights = passage_weights(passages.groups.codes, documents)
        self._pooled: np.ndarray | None = None

    def vectors(self, rows: np.ndarray, show_progress: bool = False) -> np.ndarray:
        if self._pooled is None:
            self._pooled = self._pool()
        return self._pooled[rows]

    def _pool(self) -> np.ndarray:
        """Each document's weighted mean of passage vectors (unit length for cosine)."""
        pooled = np.zeros((len(self), self.passages.stored.dimension), dtype=np.float32)
        for start in range(0, len(self.passages), POOL_BLOCK):
            rows = np.arange(start, min(start + POOL_BLOCK, len(self.passages)))
            weighted = self.passages.vectors(rows) * self.weights[rows, None]
            documents = self.passage_documents[rows]
            order = np.argsort(documents, kind="stable")
            present, first = np.unique(documents[order], return_index=True)
            pooled[present] += np.add.reduceat(weighted[order], first, axis=0)
        if self.metric == "cosine":
            faiss.normalize_L2(pooled)
        else:  # dot: the weighted mean keeps the vectors' scale
            totals = np.bincount(self.passage_documents, self.weights, minlength=len(self))
            pooled /= np.maximum(totals, np.finfo(np.float32).tiny)[:, None].astype(np.float32)
        return pooled

    def passage_rows(self, document: int) -> np.ndarray:
        """The passage rows of `document`, in order."""
        start, stop = self.passage_offsets[document], self.passage_offsets[document + 1]
        return self.passage_order[start:stop]

    def pair_texts(self, rows_a: np.ndarray, rows_b: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """For each pair of documents, the two passages whose weighted similarity adds most
        to the pair's pooled score (boilerplate weighs little, so it is shown last)."""
        rows_a, rows_b = np.asarray(rows_a, np.int64), np.asarray(rows_b, np.int64)
        counts = np.diff(self.passage_offsets)
        best_a = self.passage_order[self.passage_offsets[rows_a]]  # a document's one passage
        best_b = self.passage_order[self.passage_offsets[rows_b]]
        several = np.flatnonzero((counts[rows_a] > 1) | (counts[rows_b] > 1))
        if len(several):
            documents = np.unique(np.concatenate([rows_a[several], rows_b[several]]))
            needed = np.sort(np.concatenate([self.passage_rows(d) for d in documents.tolist()]))
            vectors = self.passages.vectors(needed) * self.weights[needed, None]
            for pair in several.tolist():
                passages_a = self.passage_rows(int(rows_a[pair]))
                passages_b = self.passage_rows(int(rows_b[pair]))
                left = vectors[np.searchsorted(needed, passages_a)]
                right = vectors[np.searchsorted(needed, passages_b)]
                # Rounded: of passages that tie (copies), the first pair is shown.
                scores = np.round(left @ right.T, TIE_DECIMALS)
                i, j = np.unravel_index(np.argmax(scores), scores.shape)
                best_a[pair], best_b[pair] = passages_a[i], passages_b[j]
        texts = self.passages.texts
        return texts.take(pa.array(best_a)), texts.take(pa.array(best_b))


def passage_weights(texts: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """One over the number of documents holding each passage's exact text (its text code)."""
    width = int(documents.max()) + 1 if len(documents) else 1
    holders = np.unique(texts * width + documents) // width  # each text once per document
    frequency = np.bincount(holders, minlength=int(texts.max()) + 1 if len(texts) else 0)
    return (1.0 / frequency[texts]).astype(np.float32)
