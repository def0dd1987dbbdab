"""Field-by-field checks of a manifest: types, ranges and known values.

A record edited by hand, or by a bug, is refused on read with the one field that cannot be
right, instead of failing later or answering wrongly. Nothing here imports torch or pyarrow;
tests/store/test_manifest.py checks that the known values match semsearch.models and
semsearch.io.corpus.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING

from semsearch.checksums import HASH_NAME
from semsearch.options import METRIC_NAMES

if TYPE_CHECKING:
    from semsearch.ann.factory import IndexSpec
    from semsearch.models.spec import EncoderSpec
    from semsearch.store.manifest import (
        ChunkSpec,
        LexicalSpec,
        Manifest,
        SegmentRecord,
        SourceSpec,
    )

SEARCH_PARAMETERS = ("nprobe", "efSearch", "oversample")  # oversample: a `disk` index
VECTOR_DTYPES = ("float32", "float16")
POOLING_MODES = ("mean", "max", "cls", "attention")
QUANTIZATION_MODES = ("int8",)
SOURCE_FORMATS = ("parquet", "csv", "tsv", "jsonl", "documents")
BM25_METHODS = ("lucene", "robertson", "atire")
SEGMENT_NAME = re.compile(r"s\d{6}")
FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
HEX_DIGEST = re.compile(r"[0-9a-f]{32}")


def validate_manifest(manifest: Manifest) -> None:
    """Raise ValueError naming the first field of a manifest whose type, range or value
    cannot be right: its own fields (`validate_header`), then each part's."""
    validate_header(manifest)
    validate_model(manifest.model, may_be_unnamed=manifest.source.vector_column is not None)
    validate_index(manifest.index)
    validate_source(manifest.source)
    require(isinstance(manifest.segments, tuple), "segments", manifest.segments, "a list")
    for segment in manifest.segments:
        validate_segment(segment)
    require(
        manifest.rows == sum(segment.live_rows for segment in manifest.segments),
        "rows",
        manifest.rows,
        "the live rows of the segments",
    )
    if manifest.lexical is not None:
        validate_lexical(manifest.lexical)
    if manifest.chunks is not None:
        validate_chunks(manifest.chunks)
    for segment in manifest.segments:
        require(
            (segment.lexical_dir is not None) == (manifest.lexical is not None),
            "segments.lexical_dir",
            segment.lexical_dir,
            "a folder name exactly when the index has a lexical part",
        )
    if manifest.files is not None:
        validate_files(manifest.files)


def validate_header(manifest: Manifest) -> None:
    """The manifest's own fields: name, counts, times, the operation that made it."""
    require(text(manifest.name), "name", manifest.name, "a non-empty string")
    require(
        count(manifest.generation) and manifest.generation >= 1,
        "generation",
        manifest.generation,
        "an integer >= 1",
    )
    require(count(manifest.next_id), "next_id", manifest.next_id, "an integer >= 0")
    require(count(manifest.rows), "rows", manifest.rows, "an integer >= 0")
    require(
        manifest.vector_dtype in VECTOR_DTYPES,
        "vector_dtype",
        manifest.vector_dtype,
        f"one of {', '.join(VECTOR_DTYPES)}",
    )
    require(
        isinstance(manifest.operation, dict) and text(manifest.operation.get("kind")),
        "operation",
        manifest.operation,
        "an object with a kind",
    )
    require(
        isinstance(manifest.semsearch_version, str),
        "semsearch_version",
        manifest.semsearch_version,
        "a string",
    )
    require(timestamp(manifest.created_at), "created_at", manifest.created_at, "an ISO time")
    require(
        isinstance(manifest.build_seconds, int | float)
        and not isinstance(manifest.build_seconds, bool)
        and manifest.build_seconds >= 0,
        "build_seconds",
        manifest.build_seconds,
        "seconds >= 0",
    )
    require(
        manifest.tuning is None or isinstance(manifest.tuning, dict),
        "tuning",
        manifest.tuning,
        "an object or null",
    )
    require(isinstance(manifest.index_id, str), "index_id", manifest.index_id, "a string")
    require(
        manifest.index_created_at == "" or timestamp(manifest.index_created_at),
        "index_created_at",
        manifest.index_created_at,
        "an ISO time",
    )


def validate_model(model: EncoderSpec, may_be_unnamed: bool = False) -> None:
    """`may_be_unnamed`: vectors from a column may name no model (an empty name)."""
    named = text(model.name) or (may_be_unnamed and model.name == "")
    require(named, "model.name", model.name, "a non-empty string")
    require(isinstance(model.fingerprint, str), "model.fingerprint", model.fingerprint, "a string")
    require(
        model.pooling in POOLING_MODES,
        "model.pooling",
        model.pooling,
        f"one of {', '.join(POOLING_MODES)}",
    )
    require(isinstance(model.normalize, bool), "model.normalize", model.normalize, "true or false")
    for name in ("max_length", "dimension"):
        value = getattr(model, name)
        require(count(value) and value >= 1, f"model.{name}", value, "an integer >= 1")
    require(
        model.quantization is None or model.quantization in QUANTIZATION_MODES,
        "model.quantization",
        model.quantization,
        "null or int8",
    )
    for name in ("query_prompt", "document_prompt"):
        value = getattr(model, name)
        require(isinstance(value, str), f"model.{name}", value, "a string (empty for none)")


def validate_index(index: IndexSpec) -> None:
    require(text(index.requested), "index.requested", index.requested, "a non-empty string")
    require(text(index.factory), "index.factory", index.factory, "a FAISS factory string")
    require(
        index.metric in METRIC_NAMES,
        "index.metric",
        index.metric,
        f"one of {', '.join(METRIC_NAMES)}",
    )
    require(
        isinstance(index.search_params, dict),
        "index.search_params",
        index.search_params,
        f"an object of {', '.join(SEARCH_PARAMETERS)}",
    )
    for name, value in index.search_params.items():
        require(
            name in SEARCH_PARAMETERS,
            f"index.search_params.{name}",
            value,
            f"parameters are {', '.join(SEARCH_PARAMETERS)}",
        )
        require(
            count(value) and value >= 1, f"index.search_params.{name}", value, "an integer >= 1"
        )
    if index.trained_file is not None:
        require(
            file_name(index.trained_file), "index.trained_file", index.trained_file, "a file name"
        )


def validate_source(source: SourceSpec) -> None:
    require(isinstance(source.path, str), "source.path", source.path, "a string")
    require(
        source.format in SOURCE_FORMATS,
        "source.format",
        source.format,
        f"one of {', '.join(SOURCE_FORMATS)}",
    )
    require(isinstance(source.sha256, str), "source.sha256", source.sha256, "a string")
    for name in ("rows_read", "rows_skipped"):
        require(
            count(getattr(source, name)), f"source.{name}", getattr(source, name), "an integer >= 0"
        )
    require(
        text(source.text_column) or (source.text_column is None and source.vector_column),
        "source.text_column",
        source.text_column,
        "a non-empty string (null only with a vector column)",
    )
    require(
        source.vector_column is None or text(source.vector_column),
        "source.vector_column",
        source.vector_column,
        "null or a non-empty string",
    )
    require(
        source.id_column is None or text(source.id_column),
        "source.id_column",
        source.id_column,
        "null or a non-empty string",
    )


def validate_segment(segment: SegmentRecord) -> None:
    require(
        isinstance(segment.name, str) and bool(SEGMENT_NAME.fullmatch(segment.name)),
        "segments.name",
        segment.name,
        "s and six digits",
    )
    for name in ("rows", "parts", "index_file_bytes", "deleted"):
        value = getattr(segment, name)
        require(count(value), f"segments.{name}", value, "an integer >= 0")
    require(
        segment.deleted <= segment.rows, "segments.deleted", segment.deleted, "at most its rows"
    )
    require(file_name(segment.index_file), "segments.index_file", segment.index_file, "a file name")
    if segment.deleted_file is not None:
        require(
            file_name(segment.deleted_file),
            "segments.deleted_file",
            segment.deleted_file,
            "a file name",
        )
    if segment.lexical_dir is not None:
        require(
            file_name(segment.lexical_dir),
            "segments.lexical_dir",
            segment.lexical_dir,
            "a folder name",
        )


def validate_chunks(chunks: ChunkSpec) -> None:
    require(
        count(chunks.tokens) and chunks.tokens >= 1,
        "chunks.tokens",
        chunks.tokens,
        "an integer >= 1",
    )
    require(
        count(chunks.overlap) and chunks.overlap < chunks.tokens,
        "chunks.overlap",
        chunks.overlap,
        "an integer >= 0, below chunks.tokens",
    )
    require(
        text(chunks.document_column),
        "chunks.document_column",
        chunks.document_column,
        "a column name",
    )
    require(isinstance(chunks.splitter, str), "chunks.splitter", chunks.splitter, "a string")


def validate_lexical(lexical: LexicalSpec) -> None:
    require(
        lexical.method in BM25_METHODS,
        "lexical.method",
        lexical.method,
        f"one of {', '.join(BM25_METHODS)}",
    )
    for name in ("k1", "b"):
        value = getattr(lexical, name)
        require(
            isinstance(value, int | float) and not isinstance(value, bool) and value >= 0,
            f"lexical.{name}",
            value,
            "a number >= 0",
        )
    require(lexical.b <= 1, "lexical.b", lexical.b, "at most 1")
    for name in ("stemmer", "stopwords"):
        require(
            isinstance(getattr(lexical, name), str),
            f"lexical.{name}",
            getattr(lexical, name),
            "a string (empty for none)",
        )


def validate_files(files: object) -> None:
    require(isinstance(files, dict), "files", files, "an object")
    for name, entry in files.items():  # type: ignore[union-attr]
        require(
            isinstance(entry, dict)
            and count(entry.get("bytes"))
            and isinstance(entry.get(HASH_NAME), str)
            and bool(HEX_DIGEST.fullmatch(entry[HASH_NAME])),
            f"files.{name}",
            entry,
            f"bytes and a 32-digit {HASH_NAME}",
        )


def require(condition: bool, name: str, value: object = None, expected: str = "") -> None:
    if not condition:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:59] + "…"
        raise ValueError(f"field {name} = {shown}, expected {expected}")


def count(value: object) -> bool:
    """An integer >= 0 (JSON true/false are not numbers here)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def text(value: object) -> bool:
    """A non-empty string (a column may be named " ")."""
    return isinstance(value, str) and value != ""


def timestamp(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def file_name(value: object) -> bool:
    return isinstance(value, str) and bool(FILE_NAME.fullmatch(value)) and value not in (".", "..")
