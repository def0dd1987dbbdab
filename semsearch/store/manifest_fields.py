"""Field-by-field checks of a manifest: types, ranges and known values.

A record edited by hand, or by a bug, is refused on read with the one field that cannot be
right, instead of failing later or answering wrongly. Nothing here imports torch or pyarrow;
tests/store/test_manifest.py checks that the known values match semsearch.models and
semsearch.io.corpus.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from semsearch.checksums import HASH_NAME
from semsearch.options import METRIC_NAMES

if TYPE_CHECKING:
    from semsearch.models.spec import EncoderSpec
    from semsearch.store.manifest import Manifest

SEARCH_PARAMETERS = ("nprobe", "efSearch", "oversample")  # oversample: a `disk` index
VECTOR_DTYPES = ("float32", "float16")
POOLING_MODES = ("mean", "max", "cls", "attention")
QUANTIZATION_MODES = ("int8",)
SOURCE_FORMATS = ("parquet", "csv", "tsv", "jsonl", "documents")
BM25_METHODS = ("lucene", "robertson", "atire")
SEGMENT_NAME = re.compile(r"s\d{6}")
FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
HEX_DIGEST = re.compile(r"[0-9a-f]{32}")

# (field, test, what it should be): checked in order, the first that fails is named.
Check = tuple[str, Callable[[object], bool], str]


def validate_manifest(manifest: Manifest) -> None:
    """Raise ValueError naming the first field of a manifest whose type, range or value
    cannot be right: its own fields, then each part's."""
    check_fields(manifest, "", HEADER_CHECKS)
    validate_model(manifest.model, may_be_unnamed=manifest.source.vector_column is not None)
    check_fields(manifest.index, "index.", INDEX_CHECKS)
    for name, value in manifest.index.search_params.items():
        require(
            name in SEARCH_PARAMETERS,
            f"index.search_params.{name}",
            value,
            f"parameters are {', '.join(SEARCH_PARAMETERS)}",
        )
        require(positive(value), f"index.search_params.{name}", value, "an integer >= 1")
    source = manifest.source
    check_fields(source, "source.", SOURCE_CHECKS)
    require(
        text(source.text_column) or (source.text_column is None and source.vector_column),
        "source.text_column",
        source.text_column,
        "a non-empty string (null only with a vector column)",
    )
    require(isinstance(manifest.segments, tuple), "segments", manifest.segments, "a list")
    for segment in manifest.segments:
        check_fields(segment, "segments.", SEGMENT_CHECKS)
        require(
            segment.deleted <= segment.rows, "segments.deleted", segment.deleted, "at most its rows"
        )
    require(
        manifest.rows == sum(segment.live_rows for segment in manifest.segments),
        "rows",
        manifest.rows,
        "the live rows of the segments",
    )
    documents = manifest.documents
    require(
        documents is None or (count(documents) and documents <= manifest.rows),
        "documents",
        documents,
        "null or an integer >= 0, at most rows",
    )
    if manifest.lexical is not None:
        check_fields(manifest.lexical, "lexical.", LEXICAL_CHECKS)
        require(manifest.lexical.b <= 1, "lexical.b", manifest.lexical.b, "at most 1")
    if manifest.chunks is not None:
        chunks = manifest.chunks
        check_fields(chunks, "chunks.", CHUNK_CHECKS)
        require(
            count(chunks.overlap) and chunks.overlap < chunks.tokens,
            "chunks.overlap",
            chunks.overlap,
            "an integer >= 0, below chunks.tokens",
        )
    for segment in manifest.segments:
        require(
            (segment.lexical_dir is not None) == (manifest.lexical is not None),
            "segments.lexical_dir",
            segment.lexical_dir,
            "a folder name exactly when the index has a lexical part",
        )
    if manifest.files is not None:
        validate_files(manifest.files)


def validate_model(model: EncoderSpec, may_be_unnamed: bool = False) -> None:
    """`may_be_unnamed`: vectors from a column may name no model (an empty name)."""
    named = text(model.name) or (may_be_unnamed and model.name == "")
    require(named, "model.name", model.name, "a non-empty string")
    check_fields(model, "model.", MODEL_CHECKS)


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


def check_fields(record: object, prefix: str, checks: Sequence[Check]) -> None:
    for name, test, expected in checks:
        value = getattr(record, name)
        require(test(value), f"{prefix}{name}", value, expected)


def require(condition: bool, name: str, value: object = None, expected: str = "") -> None:
    if not condition:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:59] + "…"
        raise ValueError(f"field {name} = {shown}, expected {expected}")


def count(value: object) -> bool:
    """An integer >= 0 (JSON true/false are not numbers here)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def positive(value: object) -> bool:
    return count(value) and value >= 1  # type: ignore[operator]


def number(value: object) -> bool:
    """A number >= 0 (JSON true/false are not numbers here)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def string(value: object) -> bool:
    return isinstance(value, str)


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


def optional(test: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or test(value)


def one_of(name: str, values: tuple[str, ...]) -> Check:
    return name, lambda value: value in values, f"one of {', '.join(values)}"


HEADER_CHECKS: tuple[Check, ...] = (
    ("name", text, "a non-empty string"),
    ("generation", positive, "an integer >= 1"),
    ("next_id", count, "an integer >= 0"),
    ("rows", count, "an integer >= 0"),
    one_of("vector_dtype", VECTOR_DTYPES),
    (
        "operation",
        lambda value: isinstance(value, dict) and text(value.get("kind")),
        "an object with a kind",
    ),
    ("semsearch_version", string, "a string"),
    ("created_at", timestamp, "an ISO time"),
    ("build_seconds", number, "seconds >= 0"),
    ("tuning", optional(lambda value: isinstance(value, dict)), "an object or null"),
    ("index_id", string, "a string"),
    ("index_created_at", lambda value: value == "" or timestamp(value), "an ISO time"),
)
MODEL_CHECKS: tuple[Check, ...] = (
    ("fingerprint", string, "a string"),
    one_of("pooling", POOLING_MODES),
    ("normalize", lambda value: isinstance(value, bool), "true or false"),
    ("max_length", positive, "an integer >= 1"),
    ("dimension", positive, "an integer >= 1"),
    ("quantization", optional(lambda value: value in QUANTIZATION_MODES), "null or int8"),
    ("query_prompt", string, "a string (empty for none)"),
    ("document_prompt", string, "a string (empty for none)"),
)
INDEX_CHECKS: tuple[Check, ...] = (
    ("requested", text, "a non-empty string"),
    ("factory", text, "a FAISS factory string"),
    one_of("metric", METRIC_NAMES),
    (
        "search_params",
        lambda value: isinstance(value, dict),
        f"an object of {', '.join(SEARCH_PARAMETERS)}",
    ),
    ("trained_file", optional(file_name), "a file name"),
)
SOURCE_CHECKS: tuple[Check, ...] = (
    ("path", string, "a string"),
    one_of("format", SOURCE_FORMATS),
    ("sha256", string, "a string"),
    ("rows_read", count, "an integer >= 0"),
    ("rows_skipped", count, "an integer >= 0"),
    ("vector_column", optional(text), "null or a non-empty string"),
    ("id_column", optional(text), "null or a non-empty string"),
)
SEGMENT_CHECKS: tuple[Check, ...] = (
    (
        "name",
        lambda value: isinstance(value, str) and bool(SEGMENT_NAME.fullmatch(value)),
        "s and six digits",
    ),
    ("rows", count, "an integer >= 0"),
    ("parts", count, "an integer >= 0"),
    ("index_file_bytes", count, "an integer >= 0"),
    ("deleted", count, "an integer >= 0"),
    ("index_file", file_name, "a file name"),
    ("deleted_file", optional(file_name), "a file name"),
    ("lexical_dir", optional(file_name), "a folder name"),
)
CHUNK_CHECKS: tuple[Check, ...] = (
    ("tokens", positive, "an integer >= 1"),
    ("document_column", text, "a column name"),
    ("splitter", string, "a string"),
)
LEXICAL_CHECKS: tuple[Check, ...] = (
    one_of("method", BM25_METHODS),
    ("k1", number, "a number >= 0"),
    ("b", number, "a number >= 0"),
    ("stemmer", string, "a string (empty for none)"),
    ("stopwords", string, "a string (empty for none)"),
)
