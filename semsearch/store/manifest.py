"""The manifest: the one record of an index generation, validated when written and when read.

Every change to an index writes a new generation: `generations/g<N>.json` holds its
record and `manifest.json`, replaced atomically, names the current one (it is a copy of
that record). Each record lists the size and hash of every file its generation holds
(`files`) and carries a hash of its own content (`checksum`), so an edited record or a
changed file is refused instead of answering wrongly. Nothing here imports torch or FAISS,
so reading a manifest is cheap.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path

from semsearch.ann.factory import IndexSpec
from semsearch.checksums import content_digest, describe_files
from semsearch.disk import temporary_for
from semsearch.errors import SemsearchError
from semsearch.models.spec import EncoderSpec
from semsearch.store.file_names import segment_file_names
from semsearch.store.manifest_fields import timestamp, validate_manifest

MANIFEST_FILE = "manifest.json"
GENERATIONS_DIR = "generations"
FORMAT_VERSION = 2
TRAINED_DIR = "trained"
CHECKSUM_KEY = "checksum"


@dataclass(frozen=True)
class LexicalSpec:
    """How the lexical (BM25) part scores and which terms it makes of a text. k1 and b are baked
    into the stored scores: changing them means `semsearch reindex NAME --lexical`."""

    method: str = "lucene"  # or robertson, atire: the BM25 variants bm25s offers
    k1: float = 1.5
    b: float = 0.75
    stemmer: str = "english"  # a PyStemmer language; "" for none
    stopwords: str = "en"  # a bm25s stop-word list; "" for none


@dataclass(frozen=True)
class ChunkSpec:
    """How an index's texts were cut into overlapping chunks, one row (and vector) each: a row's
    own id is `CHUNK_ID_COLUMN` ("<document id>#<n>"), `document_column` its document's, and
    the chunk's number and character offsets are columns beside them."""

    tokens: int  # a chunk's length in the model's tokens, at most (special tokens apart)
    overlap: int  # tokens shared by consecutive chunks
    document_column: str
    splitter: str = ""  # the library that cut them, with its version


CHUNK_ID_COLUMN = "chunk_id"
CHUNK_NUMBER_COLUMN = "chunk_number"
# The column that numbers a chunked corpus' documents when it has no id column (its rows).
DOCUMENT_NUMBER_COLUMN = "document"
CHUNK_START_COLUMN = "start"
CHUNK_END_COLUMN = "end"
CHUNK_COLUMNS = (CHUNK_ID_COLUMN, CHUNK_NUMBER_COLUMN, CHUNK_START_COLUMN, CHUNK_END_COLUMN)


@dataclass(frozen=True)
class SourceSpec:
    """Where the first build's rows came from, and which columns hold texts, ids and vectors
    (`vector_column`: your own vectors; `text_column` is then None where rows have no text).
    `rows_read` and `rows_skipped` are the input's rows (a chunked index's documents), and
    `id_column` is the user's (a chunked index's rows are keyed by `Manifest.key_column`)."""

    path: str
    format: str
    sha256: str
    rows_read: int
    rows_skipped: int
    text_column: str | None
    id_column: str | None
    vector_column: str | None = None


@dataclass(frozen=True)
class SegmentRecord:
    """One segment as a generation sees it: its stored rows and the ids deleted from them."""

    name: str
    rows: int
    parts: int
    index_file: str  # the segment's FAISS file; a reindex writes a new one beside it
    index_file_bytes: int
    deleted: int = 0
    deleted_file: str | None = None  # sorted int64 ids, under the segment's folder
    lexical_dir: str | None = None  # the segment's BM25 folder (see semsearch.store.lexical)
    metadata_arrow: bool = True  # each part's metadata also as Arrow IPC (False: older)
    documents: bool = False  # chunked parts keep documents apart (`store.documents`)
    # Ids of the rows kept out of the FAISS structure, tuned on and searched exactly beside
    # it (`semsearch.store.held_out`); empty in older indexes and in added segments.
    held_out: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "held_out", tuple(int(row) for row in self.held_out))

    @property
    def live_rows(self) -> int:
        return self.rows - self.deleted


@dataclass(frozen=True)
class Manifest:
    """How one generation of an index was made and which files make it up."""

    name: str
    generation: int
    rows: int  # live rows (vectors; a chunked index's chunks): stored minus deleted
    model: EncoderSpec
    index: IndexSpec
    source: SourceSpec
    segments: tuple[SegmentRecord, ...]
    next_id: int  # the id the next new row gets
    vector_dtype: str
    operation: dict  # what made this generation: {"kind": "add", "added": 10, ...}
    semsearch_version: str
    created_at: str
    build_seconds: float
    tuning: dict | None = None  # how the search parameter was chosen, when it was tuned
    # Which build this folder holds and when it was made: set by the first build, kept.
    index_id: str = ""
    index_created_at: str = ""
    # {path under the folder: {"bytes": size, "xxh3": hash}}; None in older indexes.
    files: dict[str, dict] | None = None
    format_version: int = FORMAT_VERSION
    lexical: LexicalSpec | None = None  # None: no BM25 part (no segment has a lexical_dir)
    chunks: ChunkSpec | None = None  # None: one row per text
    # Live documents (the input's rows) over all segments: `rows` unless chunked. None: a
    # chunked index written before they were recorded (its next add or delete records them).
    documents: int | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["segments"] = [asdict(segment) for segment in self.segments]
        return data

    def view(self) -> dict:
        """The record as `info`, `build --json` and the server show it: its counts as the user
        counts them (`counts`: `rows` the documents, `chunks` beside them where chunked; the
        chunk sizes, recorded as `chunks`, are shown as `chunking`, without the document
        column: `source.id_column` names the user's)."""
        data = self.to_dict()
        del data["documents"]
        data["chunking"] = data.pop("chunks")
        if data["chunking"] is not None:  # the user's id column, or the internal row numbers
            del data["chunking"]["document_column"]
        shown = {}
        for key, value in data.items():
            shown[key] = value
            if key == "rows":
                shown.update(self.counts())
        return shown

    @classmethod
    def from_dict(cls, data: dict) -> Manifest:
        chunks = _optional(ChunkSpec, data.get("chunks"))
        manifest = cls(
            **{
                **_known(cls, data),
                "model": EncoderSpec(**_known(EncoderSpec, data["model"])),
                "index": IndexSpec(**_known(IndexSpec, data["index"])),
                "source": _user_source(SourceSpec(**_known(SourceSpec, data["source"])), chunks),
                "lexical": _optional(LexicalSpec, data.get("lexical")),
                "chunks": chunks,
                "segments": tuple(
                    SegmentRecord(**{"metadata_arrow": False, **_known(SegmentRecord, item)})
                    for item in data["segments"]
                ),
            }
        )
        validate_manifest(manifest)
        return manifest

    def file_names(self, opened_only: bool = False) -> list[str]:
        """Every file of this generation, as paths under the index folder; `opened_only`:
        those an open for search reads whole (not the vectors, trained structures or lexical
        parts, read piecemeal, by writers, or by the first lexical search)."""
        names = []
        for segment in self.segments:
            names += segment_file_names(segment, opened_only)
        if self.index.trained_file is not None and not opened_only:
            names.append(f"{TRAINED_DIR}/{self.index.trained_file}")
        return names

    @property
    def text_column(self) -> str | None:
        """The column of texts; None for an index of your own vectors without texts."""
        return self.source.text_column

    @property
    def own_vectors(self) -> bool:
        """Whether the vectors came from a corpus column rather than from the model."""
        return self.source.vector_column is not None

    @property
    def has_model(self) -> bool:
        """Whether a model can encode text queries for this index (one of your own vectors
        may name none: it is then queried by vector only)."""
        return self.model.name != ""

    @property
    def id_column(self) -> str | None:
        """The user's id column (a chunked index's documents' ids); None: rows are numbered."""
        return self.source.id_column

    @property
    def key_column(self) -> str | None:
        """The column that identifies a stored row: a chunk's own id (`<document id>#<n>`) on
        a chunked index, else the user's id column (None: the row id, `_semsearch_id`)."""
        return CHUNK_ID_COLUMN if self.chunks is not None else self.source.id_column

    @property
    def live_documents(self) -> int | None:
        """The live documents, as the user counts them (the input's rows); None where a
        chunked index written before they were recorded does not say."""
        return self.rows if self.chunks is None else self.documents

    def counts(self) -> dict[str, int | None]:
        """The live rows as every command shows them: `rows`, the documents (the input's
        rows), and on a chunked index `chunks`, the rows of the index they make."""
        if self.chunks is None:
            return {"rows": self.rows}
        return {"rows": self.documents, "chunks": self.rows}


def generation_file(folder: Path, generation: int) -> Path:
    return folder / GENERATIONS_DIR / f"g{generation:06d}.json"


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Record a generation, then make it current: each file appears whole or not at all. The
    record gets the size and hash of each new file (the others keep their entries) and of its
    own content; a writer killed between the renames leaves a record the next one removes."""
    try:
        validate_manifest(manifest)
    except ValueError as exc:
        raise SemsearchError(f"refusing to write a manifest with a bad {exc}") from None
    manifest = _with_identity(folder, manifest)
    manifest = replace(
        manifest, files=describe_files(folder, manifest.file_names(), manifest.files or {})
    )
    data = json.loads(json.dumps(manifest.to_dict(), ensure_ascii=False))  # as a reader sees it
    data[CHECKSUM_KEY] = content_digest(data)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    record = generation_file(folder, manifest.generation)
    record.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(record, text)
    _write_atomically(folder / MANIFEST_FILE, text)


def read_manifest(folder: Path, generation: int | None = None) -> Manifest:
    """The current generation's record, or generation `generation`'s, checked field by field
    and against its own checksum."""
    path = folder / MANIFEST_FILE if generation is None else generation_file(folder, generation)
    try:
        return load_record(path)
    except FileNotFoundError:
        if generation is not None and (folder / MANIFEST_FILE).is_file():
            there = ", ".join(str(number) for number in generation_numbers(folder))
            raise SemsearchError(
                f"index {folder.name!r} has no generation {generation} (it has: {there}); "
                "see 'semsearch info'"
            ) from None
        raise SemsearchError(
            f"{folder} has no {MANIFEST_FILE}: it is not a semsearch index"
        ) from None
    except OldFormat as exc:
        raise SemsearchError(
            f"index {folder.name!r} has format {exc.args[0]!r} (an earlier semsearch, "
            f"before stored vectors and generations); this one reads format {FORMAT_VERSION}: "
            f"rebuild it with 'semsearch build CORPUS --name {folder.name} --overwrite'"
        ) from None
    except (OSError, ValueError) as exc:
        raise SemsearchError(f"{path} is damaged ({exc}): {restore_advice(folder, path)}") from None


class OldFormat(Exception):
    """A manifest of another format version (its number is the argument)."""


def load_record(path: Path) -> Manifest:
    """A manifest file, checked; ValueError names what is wrong, FileNotFoundError and
    OldFormat say it is absent or of another format."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("format_version") != FORMAT_VERSION:
        raise OldFormat(data.get("format_version"))
    recorded = data.pop(CHECKSUM_KEY, None)
    if recorded is None and data.get("files") is not None:
        raise ValueError(
            f"it lists file checksums but has no {CHECKSUM_KEY} of its own: it was edited"
        )
    if recorded is not None and recorded != content_digest(data):
        raise ValueError(
            "it was edited after semsearch wrote it: its checksum does not match its content"
        )
    try:
        return Manifest.from_dict(data)
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def restore_advice(folder: Path, damaged: Path | None = None) -> str:
    """What to do about a damaged generation: roll back to the newest record that reads, or
    rebuild."""
    for number in reversed(generation_numbers(folder)):
        candidate = generation_file(folder, number)
        if candidate == damaged:
            continue
        try:
            load_record(candidate)
        except (OSError, ValueError, OldFormat):
            continue
        return f"roll back with 'semsearch rollback {folder.name} {number}', or rebuild the index with --overwrite"
    return f"rebuild it with 'semsearch build CORPUS --name {folder.name} --overwrite'"


def generation_numbers(folder: Path) -> list[int]:
    """The generations recorded in `folder`, oldest first."""
    numbers = []
    for path in (folder / GENERATIONS_DIR).glob("g*.json"):
        if re.fullmatch(r"g\d{6}\.json", path.name):
            numbers.append(int(path.name[1:7]))
    return sorted(numbers)


def created_at(folder: Path, manifest: Manifest) -> str:
    """When the index in `folder` was first built (older indexes: their oldest record's time)."""
    if manifest.index_created_at:
        return manifest.index_created_at
    for number in generation_numbers(folder):
        try:
            value = json.loads(generation_file(folder, number).read_text(encoding="utf-8"))[
                "created_at"
            ]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if timestamp(value):
            return value
    return manifest.created_at


def _with_identity(folder: Path, manifest: Manifest) -> Manifest:
    """A first build (or an index written before they existed) gets its id and creation time."""
    if manifest.index_id:
        return manifest
    first = (
        datetime.now(timezone.utc).isoformat(timespec="microseconds")
        if manifest.generation == 1
        else created_at(folder, manifest)
    )
    return replace(manifest, index_id=uuid.uuid4().hex, index_created_at=first)


def _write_atomically(path: Path, text: str) -> None:
    with temporary_for(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def _user_source(source: SourceSpec, chunks: ChunkSpec | None) -> SourceSpec:
    """A chunked index written before recorded its chunks' own id column as the id column:
    read it as the user's (its documents' ids; none where they were numbered by row)."""
    if chunks is None or source.id_column != CHUNK_ID_COLUMN:
        return source
    document_column = chunks.document_column
    return replace(
        source, id_column=None if document_column == DOCUMENT_NUMBER_COLUMN else document_column
    )


def _optional(cls: type, data: dict | None):
    return None if data is None else cls(**_known(cls, data))


def _known(cls: type, data: dict) -> dict:
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} is not a JSON object")
    names = {item.name for item in fields(cls)}
    return {key: value for key, value in data.items() if key in names}
