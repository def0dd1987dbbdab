"""The collection to mine: its texts and ids, their exact-duplicate groups, and their vectors.

A collection comes from a corpus file (read with the corpus reader, encoded with a
bi-encoder) or from an index folder (the vectors it stores, texts and ids
from its metadata, model and metric from its manifest), so an index is never re-encoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semsearch.ann.vector_index import VectorIndex, prepare_vectors
from semsearch.errors import SemsearchError
from semsearch.io.corpus import SOURCE_ROW_COLUMN, RowFilter, open_corpus
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.models.prompts import encode_queries
from semsearch.phases import phase
from semsearch.store.folders import DEFAULT_INDEX_DIR, IndexFolder, find_index
from semsearch.store.manifest import Manifest
from semsearch.store.segment import ID_COLUMN, Segment

if TYPE_CHECKING:  # torch only where a corpus file is encoded: an index's vectors need none
    from semsearch.models.bi_encoder import BiEncoder

SimilarityMetric = Literal["cosine", "dot"]


@dataclass(frozen=True)
class CorpusSource:
    """A corpus file to mine, and how to read and encode it."""

    path: Path
    text_column: str = "text"
    id_column: str | None = None
    model: str = DEFAULT_MODEL
    metric: SimilarityMetric = "cosine"
    batch_size: int | None = None  # None: the device's default
    device: str = "auto"
    query_prompt: str | None = None  # before every text (None: the model folder's; "": none)


@dataclass(frozen=True)
class ExactGroups:
    """Rows with identical text share a code; codes are numbered by first occurrence."""

    codes: np.ndarray
    first_rows: np.ndarray

    @classmethod
    def of(cls, texts: pa.Array) -> ExactGroups:
        codes = pc.dictionary_encode(texts).indices.to_numpy(zero_copy_only=False)
        codes = codes.astype(np.int64)
        _, first_rows = np.unique(codes, return_index=True)
        return cls(codes=codes, first_rows=first_rows.astype(np.int64))

    @property
    def counts(self) -> np.ndarray:
        return np.bincount(self.codes, minlength=len(self.first_rows))

    @property
    def duplicate_rows(self) -> int:
        """Rows whose text already appeared in an earlier row."""
        return len(self.codes) - len(self.first_rows)


class Collection:
    """Texts with their ids and a way to get their vectors; subclasses say where from."""

    def __init__(self, name: str, texts: pa.Array, ids: pa.Array, metric: str) -> None:
        self.name = name
        self.texts = texts
        self.ids = ids
        self.metric = metric
        self.rows_skipped = 0
        self.documents: np.ndarray | None = None  # a chunked index's: each row's document code

    def __len__(self) -> int:
        return len(self.texts)

    @cached_property
    def groups(self) -> ExactGroups:
        return ExactGroups.of(self.texts)

    def vectors(self, rows: np.ndarray, show_progress: bool = False) -> np.ndarray:
        """Search-ready vectors (unit length for cosine) of `rows`, increasing positions."""
        raise NotImplementedError

    def trained_index(self) -> tuple[VectorIndex, dict[str, int], str] | None:
        """The FAISS index these vectors sit in (with its search parameters), if any."""
        return None

    def pair_texts(self, rows_a: np.ndarray, rows_b: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """The texts shown for pairs (rows_a[i], rows_b[i]): here, the rows' own texts."""
        return self.texts.take(pa.array(rows_a)), self.texts.take(pa.array(rows_b))


class EncodedCollection(Collection):
    """A corpus file's usable rows, encoded on demand; identical texts are encoded once."""

    def __init__(self, source: CorpusSource, encoder: BiEncoder | None = None) -> None:
        corpus = open_corpus(source.path)
        row_filter = RowFilter(source.text_column, source.id_column)
        row_filter.check_columns(corpus)
        id_column = source.id_column or SOURCE_ROW_COLUMN
        texts, ids = [], []
        for batch in corpus.batches():
            kept = row_filter.apply(batch)
            texts.append(kept.column(source.text_column))
            ids.append(kept.column(id_column))
        id_type = corpus.schema.field(id_column).type if source.id_column else pa.int64()
        super().__init__(
            name=corpus.path.name,
            texts=_combine(texts, pa.large_string()),
            ids=_combine(ids, id_type),
            metric=source.metric,
        )
        self.rows_skipped = row_filter.skipped
        self.source = source
        self._encoder = encoder

    @property
    def encoder(self) -> BiEncoder:
        if self._encoder is None:
            from semsearch.models.bi_encoder import BiEncoder

            self._encoder = BiEncoder.load(
                self.source.model,
                device=self.source.device,
                query_prompt=self.source.query_prompt,
            )
        return self._encoder

    def vectors(self, rows: np.ndarray, show_progress: bool = False) -> np.ndarray:
        with phase("load model"):
            encoder = self.encoder
        with phase("encode"):
            codes, back = np.unique(self.groups.codes[rows], return_inverse=True)
            texts = self.texts.take(pa.array(self.groups.first_rows[codes])).to_pylist()
            encoded = encode_queries(  # symmetric: both sides of a pair are "queries"
                encoder, texts, batch_size=self.source.batch_size, show_progress=show_progress
            )
            return prepare_vectors(encoded, self.metric)[back]


class StoredVectors:
    """An index's stored vectors of its live rows (in collection order), memory-mapped and
    read a few at a time: what `IndexedCollection` and every mining worker on Ray read."""

    def __init__(self, folder: IndexFolder, manifest: Manifest) -> None:
        self.folder = folder
        self.manifest = manifest
        self.metric = manifest.index.metric
        self.dimension = manifest.model.dimension
        self.segments = [Segment(folder.segment_dir(r.name), r) for r in manifest.segments]
        self.live_masks = [segment.live_mask() for segment in self.segments]
        self._positions = [np.flatnonzero(mask) for mask in self.live_masks]

    def __len__(self) -> int:
        return sum(len(positions) for positions in self._positions)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Search-ready vectors (unit length for cosine) of collection `rows`, increasing."""
        output = np.empty((len(rows), self.dimension), dtype=np.float32)
        start = 0
        for segment, positions in zip(self.segments, self._positions):
            inside = (rows >= start) & (rows < start + len(positions))
            if inside.any():
                output[inside] = segment.vectors_at(positions[rows[inside] - start])
            start += len(positions)
        if self.metric == "cosine":
            faiss.normalize_L2(output)  # in place: fp16 storage rounds the unit length
        return output

    def trained_index(self) -> tuple[VectorIndex, dict[str, int], str] | None:
        """The index's own trained structure (empty), for the miner to fill, if it has one."""
        spec = self.manifest.index
        if not spec.trained_file:
            return None
        index = VectorIndex.read(self.folder.trained_path(spec.trained_file), spec.metric)
        return index, dict(spec.search_params), spec.factory


class SearchedVectors:
    """The searched `rows` of stored vectors as a `VectorSource`: position i is rows[i]."""

    def __init__(self, stored: StoredVectors, rows: np.ndarray) -> None:
        self.stored = stored
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def dimension(self) -> int:
        return self.stored.dimension

    def take(self, positions: np.ndarray | range) -> np.ndarray:
        if isinstance(positions, range):
            return self.stored.take(self.rows[positions.start : positions.stop])
        return self.stored.take(self.rows[positions])


class IndexedCollection(Collection):
    """An index's live rows: vectors read from the ones it stores, never re-encoded."""

    def __init__(self, name: str | None, index_dir: Path = DEFAULT_INDEX_DIR) -> None:
        folder = find_index(name, index_dir)
        manifest = folder.manifest()
        if manifest.index.metric not in ("cosine", "dot"):
            raise SemsearchError(
                f"index {folder.name!r} uses the {manifest.index.metric} distance; mining ranks "
                "pairs by similarity: build the index with --metric cosine or dot"
            )
        if manifest.text_column is None:
            raise SemsearchError(
                f"index {folder.name!r} holds your own vectors without texts: mining pairs "
                "texts, so build the index with a --text-column"
            )
        id_column = manifest.id_column or ID_COLUMN
        if manifest.chunks is not None:  # pairs of documents, each by its passages
            id_column = manifest.chunks.document_column
        self.stored = StoredVectors(folder, manifest)
        texts, ids = [], []
        for segment, mask in zip(self.stored.segments, self.stored.live_masks):
            start = 0  # one metadata part decoded at a time: the texts are held once, not twice
            for part in segment.iter_metadata([manifest.text_column, id_column]):
                kept = part.filter(pa.array(mask[start : start + part.num_rows]))
                texts.append(kept.column(manifest.text_column))
                ids.append(kept.column(id_column))
                start += part.num_rows
        super().__init__(
            name=folder.name,
            texts=_combine([c.combine_chunks() for c in texts], pa.large_string()),
            ids=pa.chunked_array([c.combine_chunks() for c in ids]).combine_chunks(),
            metric=manifest.index.metric,
        )
        self.folder = folder
        self.manifest: Manifest = manifest
        if manifest.chunks is not None:
            self.documents = pc.dictionary_encode(self.ids).indices.to_numpy()

    def vectors(self, rows: np.ndarray, show_progress: bool = False) -> np.ndarray:
        with phase("read vectors"):
            return self.stored.take(rows)

    def trained_index(self) -> tuple[VectorIndex, dict[str, int], str] | None:
        return self.stored.trained_index()


def _combine(chunks: list[pa.Array], type_: pa.DataType) -> pa.Array:
    if not chunks:
        return pa.array([], type_)
    return pa.chunked_array([chunk.cast(type_) for chunk in chunks], type=type_).combine_chunks()
