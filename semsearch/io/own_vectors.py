"""Your own vectors: embeddings read from a corpus column instead of made by a model.

A build or add given `vector_column` takes each row's vector from that column in the encode
stage (`semsearch.ingest.parts`), so everything after it is the same as for encoded texts.
The manifest records the column and the model that made the vectors, or none
(`model.name == ""`): such an index is queried by vector only. Every check here refuses bad
input in one line, before anything is written.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semsearch.ann.metrics import prepare_vectors
from semsearch.errors import SemsearchError
from semsearch.io.corpus import is_many_files, open_corpus
from semsearch.models.spec import EncoderSpec

if TYPE_CHECKING:
    from semsearch.ingest.build_options import BuildOptions

log = logging.getLogger(__name__)

DEFAULT_TEXT_COLUMN = "text"

# What a manifest records for the "model" of an index whose vectors came from a column and
# whose maker was not named: nothing can encode a text for it.
NO_MODEL = ""


@dataclass(frozen=True)
class VectorColumn:
    """Where a part's own vectors are (`name`), their size (None: the first row's) and the
    metric that decides how they are stored."""

    name: str
    dimension: int | None
    metric: str

    def vectors(self, rows: pa.Table) -> np.ndarray:
        """The rows' vectors, checked (`column_vectors`) and stored as the metric wants."""
        found = column_vectors(rows.column(self.name), self.name, self.dimension)
        return prepare_vectors(found, self.metric)


def with_vector_column(options: BuildOptions, other_source: bool = False) -> BuildOptions:
    """`options` for a build from your own vectors, checked: one corpus file, a column of
    lists of numbers, no text column (and no BM25 part) when the corpus has no `text` and
    none was named."""
    if is_many_files(options.corpus):
        raise SemsearchError(
            "--vector-column reads one corpus file (on --engine local or ray): pass a single "
            "file, not a folder or a glob"
        )
    if other_source:
        raise SemsearchError(
            "--vector-column is read by semsearch's own corpus readers, and this build's "
            "source of rows does not read it: build from a single corpus file"
        )
    corpus = open_corpus(options.corpus)
    check_vector_type(corpus.schema, options.vector_column, corpus.path.name)
    if options.vector_column in (options.text_column, options.id_column):
        raise SemsearchError(
            f"{options.vector_column!r} cannot be both the vector column and the text or id column"
        )
    text_column = options.text_column
    if text_column == DEFAULT_TEXT_COLUMN and text_column not in corpus.columns:
        text_column = None  # the default, absent: the rows have vectors and metadata only
    lexical = options.lexical if text_column is not None else None
    if options.lexical is not None and lexical is None:
        log.info("no text column: no BM25 part (queries are dense only)")
    return replace(options, text_column=text_column, lexical=lexical)


def no_model_message(index_name: str, by_vector: str = "--vectors FILE.npy") -> str:
    """The one line for a text query on an index of your own vectors that names no model
    (`by_vector`: how the caller's interface takes query vectors)."""
    return (
        f"index {index_name!r} holds your own vectors and names no model: query with "
        f"{by_vector}, or rebuild with --model NAME"
    )


def column_spec(dimension: int, metric: str) -> EncoderSpec:
    """The manifest's model record for vectors from a column that no named model made."""
    return EncoderSpec(
        name=NO_MODEL,
        fingerprint="",
        pooling="mean",
        normalize=metric == "cosine",
        max_length=1,
        dimension=dimension,
    )


class ColumnVectors:
    """The encoder of an index of your own vectors that names no model: it knows the
    vectors' size and refuses texts (a build's `--tuning-queries`, an add's texts)."""

    def __init__(self, spec: EncoderSpec, index_name: str = "") -> None:
        self.spec = spec
        self.index_name = index_name
        self.name = spec.name
        self.dimension = spec.dimension
        self.fingerprint = spec.fingerprint
        self.quantization = spec.quantization

    def encode(self, texts, **_: object) -> np.ndarray:
        raise SemsearchError(no_model_message(self.index_name))


def check_vector_type(schema: pa.Schema, column: str, file_name: str) -> None:
    """Refuse a vector column that is missing or does not hold lists of numbers."""
    if column not in schema.names:
        raise SemsearchError(
            f"vector column {column!r} is not in {file_name}; its columns are: "
            f"{', '.join(schema.names)} (choose one with --vector-column)"
        )
    data_type = schema.field(column).type
    is_list = (
        pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_fixed_size_list(data_type)
    )
    value_type = data_type.value_type if is_list else None
    if not is_list or not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
        raise SemsearchError(
            f"vector column {column!r} holds {data_type}, not lists of numbers: give each row "
            "its vector as a list of floats (or a fixed-size list)"
        )


def column_vectors(
    values: pa.Array | pa.ChunkedArray, column: str, dimension: int | None, first_row: int = 0
) -> np.ndarray:
    """The vectors of a column's rows as float32 [rows, dimension], checked: no null row or
    value, one length for all (`dimension` when given), every value finite. `first_row` is
    the source row of the first value, for the messages."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.null_count:
        row = first_row + pc.index(pc.is_null(values), True).as_py()
        raise SemsearchError(
            f"vector column {column!r} is null in row {row}: every row needs a vector"
        )
    if len(values) == 0:
        return np.empty((0, dimension or 0), np.float32)
    if pa.types.is_fixed_size_list(values.type):
        lengths = np.full(len(values), values.type.list_size)
    else:
        lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
    flat = values.flatten()
    if flat.null_count:
        at = pc.index(pc.is_null(flat), True).as_py()
        row = first_row + int(np.searchsorted(np.cumsum(lengths), at, side="right"))
        raise SemsearchError(f"vector column {column!r} has a null value in row {row}: fill it")
    expected = int(lengths[0]) if dimension is None else dimension
    wrong = np.flatnonzero(lengths != expected)
    if len(wrong):
        row = first_row + int(wrong[0])
        what = "the index's" if dimension is not None else f"row {first_row}'s"
        raise SemsearchError(
            f"vector column {column!r} holds a {int(lengths[wrong[0]])}-d vector in row {row}, "
            f"{what} are {expected}-d: every vector needs the same size"
        )
    if expected == 0:
        raise SemsearchError(f"vector column {column!r} holds empty vectors in row {first_row}")
    # No copy where the values are float32 already: a zero-copy view of the Arrow buffer.
    vectors = flat.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    vectors = vectors.reshape(len(values), expected)
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        row = first_row + int(np.flatnonzero(~finite)[0])
        raise SemsearchError(
            f"vector column {column!r} holds NaN or infinite values in row {row} "
            "(or values too large for float32): fix or drop that row"
        )
    return vectors


def vector_hashes(vectors: np.ndarray, text_hashes: np.ndarray | None) -> np.ndarray:
    """A 64-bit hash per row of its vector's bytes (and its text's hash, when it has a text),
    stored as the row's text hash: an add then sees a changed vector as a changed row.

    Each row's message (its float32 bytes, then the salt as 8 little-endian bytes) is laid
    out once in one buffer and hashed from a memoryview slice: no bytes object per row.
    BLAKE2b itself is most of the time (about 1.4 s of the 1.8 s per 841,708 384-d rows on
    one core); the values are the ones every index stores, so they never change."""
    rows = np.ascontiguousarray(vectors, dtype=np.float32)
    count, width = len(rows), rows.shape[1] * 4 + 8
    extra = text_hashes if text_hashes is not None else np.zeros(count, np.int64)
    messages = np.empty((count, width), np.uint8)
    messages[:, : width - 8] = rows.view(np.uint8).reshape(count, width - 8)
    messages[:, width - 8 :] = np.asarray(extra, "<i8").view(np.uint8).reshape(count, 8)
    flat = memoryview(messages.reshape(-1))  # one row a slice: no copy
    blake2b = hashlib.blake2b
    digests = b"".join(
        [
            blake2b(flat[at : at + width], digest_size=8).digest()
            for at in range(0, flat.nbytes, width)
        ]
    )
    return np.frombuffer(digests, dtype="<i8").astype(np.int64)


def dimension_of(batches, column: str, file_name: str) -> tuple[int, int]:
    """Check every vector of a column (streamed `batches` of it) and return (dimension, rows)."""
    dimension, rows = None, 0
    for batch in batches:
        vectors = column_vectors(batch.column(0), column, dimension, rows)
        if dimension is None and len(vectors):
            dimension = vectors.shape[1]
        rows += batch.num_rows
    if dimension is None:
        raise SemsearchError(f"{file_name} has no rows: no vectors to index")
    return dimension, rows


def query_vectors(vectors: object, dimension: int, what: str = "the query vectors") -> np.ndarray:
    """Query vectors as float32 [queries, dimension], or one line saying what is wrong: one
    vector (1-D) is one query; anything but a 2-D array of finite numbers is refused."""
    try:
        array = np.asarray(vectors)
    except ValueError:  # ragged nested lists
        raise SemsearchError(f"{what} are ragged: give every vector {dimension} numbers") from None
    if array.dtype == object:
        raise SemsearchError(
            f"{what} are ragged or not numbers: give every vector {dimension} numbers"
        )
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] == 0:
        raise SemsearchError(
            f"{what} must be a 2-D array, one query a row, not of shape {array.shape}"
        )
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise SemsearchError(f"{what} hold {array.dtype}, not numbers")
    if array.shape[1] != dimension:
        raise SemsearchError(
            f"{what} are {array.shape[1]}-d; the index holds {dimension}-d vectors"
        )
    array = array.astype(np.float32)
    finite = np.isfinite(array).all(axis=1)
    if not finite.all():
        raise SemsearchError(
            f"{what} hold NaN or infinite values (query row {int(np.flatnonzero(~finite)[0])})"
        )
    return array
