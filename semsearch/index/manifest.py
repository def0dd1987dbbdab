"""The manifest: the one record of an index generation, validated when written and when read.

Every change to an index writes a new generation: `generations/g<N>.json` holds its
record and `manifest.json`, replaced atomically, names the current one (it is a copy of
that record). Nothing here imports torch or FAISS, so reading a manifest is cheap.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from semsearch.errors import SemsearchError
from semsearch.models.spec import EncoderSpec

MANIFEST_FILE = "manifest.json"
GENERATIONS_DIR = "generations"
FORMAT_VERSION = 2
METRIC_NAMES = ("cosine", "dot", "l2", "manhattan")
SEARCH_PARAMETERS = ("nprobe", "efSearch")
VECTOR_DTYPES = ("float32", "float16")
SEGMENT_NAME = re.compile(r"s\d{6}")
FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class IndexSpec:
    """The FAISS structure: the user's choice, the factory string it became, its search knobs.

    `trained_file` (under `trained/`) is the trained, empty structure that every segment of
    a trained type (IVF, PQ) starts from, so that a segment added later shares its centroids.
    """

    requested: str
    factory: str
    metric: str
    search_params: dict[str, int] = field(default_factory=dict)
    trained_file: str | None = None


@dataclass(frozen=True)
class SourceSpec:
    """Where the first build's rows came from, and which columns hold texts and ids."""

    path: str
    format: str
    sha256: str
    rows_read: int
    rows_skipped: int
    text_column: str
    id_column: str | None


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

    @property
    def live_rows(self) -> int:
        return self.rows - self.deleted


@dataclass(frozen=True)
class Manifest:
    """How one generation of an index was made and which files make it up."""

    name: str
    generation: int
    rows: int  # live rows: stored minus deleted, over all segments
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
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict:
        data = asdict(self)
        data["segments"] = [asdict(segment) for segment in self.segments]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Manifest:
        manifest = cls(
            **{
                **_known(cls, data),
                "model": EncoderSpec(**_known(EncoderSpec, data["model"])),
                "index": IndexSpec(**_known(IndexSpec, data["index"])),
                "source": SourceSpec(**_known(SourceSpec, data["source"])),
                "segments": tuple(
                    SegmentRecord(**_known(SegmentRecord, item)) for item in data["segments"]
                ),
            }
        )
        manifest.validate()
        return manifest

    def validate(self) -> None:
        """Raise ValueError naming the first field that cannot be right."""
        _require(isinstance(self.generation, int) and self.generation >= 1, "generation")
        _require(isinstance(self.next_id, int) and self.next_id >= 0, "next_id")
        _require(self.vector_dtype in VECTOR_DTYPES, "vector_dtype")
        _require(self.index.metric in METRIC_NAMES, "index.metric")
        _require(isinstance(self.index.factory, str) and bool(self.index.factory), "index.factory")
        _require(isinstance(self.index.search_params, dict), "index.search_params")
        for name, value in self.index.search_params.items():
            _require(name in SEARCH_PARAMETERS, f"index.search_params.{name}")
            _require(_positive_int(value), f"index.search_params.{name}")
        if self.index.trained_file is not None:
            _require(_file_name(self.index.trained_file), "index.trained_file")
        for name in ("max_length", "dimension"):
            _require(_positive_int(getattr(self.model, name)), f"model.{name}")
        _require(isinstance(self.source.text_column, str) and bool(self.source.text_column),
                 "source.text_column")  # fmt: skip
        _require(self.source.id_column is None or isinstance(self.source.id_column, str),
                 "source.id_column")  # fmt: skip
        for segment in self.segments:
            _require(isinstance(segment.name, str) and bool(SEGMENT_NAME.fullmatch(segment.name)),
                     "segments.name")  # fmt: skip
            for name in ("rows", "parts", "index_file_bytes", "deleted"):
                _require(isinstance(getattr(segment, name), int) and getattr(segment, name) >= 0,
                         f"segments.{name}")  # fmt: skip
            _require(segment.deleted <= segment.rows, "segments.deleted")
            _require(_file_name(segment.index_file), "segments.index_file")
            if segment.deleted_file is not None:
                _require(_file_name(segment.deleted_file), "segments.deleted_file")
        _require(self.rows == sum(segment.live_rows for segment in self.segments), "rows")

    @property
    def text_column(self) -> str:
        return self.source.text_column

    @property
    def id_column(self) -> str | None:
        return self.source.id_column


def generation_file(folder: Path, generation: int) -> Path:
    return folder / GENERATIONS_DIR / f"g{generation:06d}.json"


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Record a generation, then make it current: each file appears whole or not at all.

    A writer killed between the two renames leaves the generation's record unreferenced;
    the next writer removes it (`store.remove_leftovers`).
    """
    try:
        manifest.validate()
    except ValueError as exc:
        raise SemsearchError(f"refusing to write a manifest with a bad {exc}") from None
    text = json.dumps(manifest.to_dict(), indent=2, ensure_ascii=False) + "\n"
    record = generation_file(folder, manifest.generation)
    record.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(record, text)
    _write_atomically(folder / MANIFEST_FILE, text)


def read_manifest(folder: Path, generation: int | None = None) -> Manifest:
    """The current generation's record, or generation `generation`'s."""
    path = folder / MANIFEST_FILE if generation is None else generation_file(folder, generation)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if generation is not None and (folder / MANIFEST_FILE).is_file():
            there = ", ".join(str(number) for number in generation_numbers(folder))
            raise SemsearchError(
                f"index {folder.name!r} has no generation {generation} (it has: {there}); "
                "see 'semsearch info'"
            ) from None
        raise SemsearchError(f"{folder} has no {MANIFEST_FILE}: it is not a semsearch index") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _damaged(path, exc) from None
    if not isinstance(data, dict):
        raise _damaged(path, ValueError("not a JSON object"))
    if data.get("format_version") != FORMAT_VERSION:
        raise SemsearchError(
            f"index {folder.name!r} has format {data.get('format_version')!r} (an earlier semsearch, "
            f"before stored vectors and generations); this one reads format {FORMAT_VERSION}: "
            f"rebuild it with 'semsearch build CORPUS --name {folder.name} --overwrite'"
        )
    try:
        return Manifest.from_dict(data)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise _damaged(path, exc) from None


def generation_numbers(folder: Path) -> list[int]:
    """The generations recorded in `folder`, oldest first."""
    numbers = []
    for path in (folder / GENERATIONS_DIR).glob("g*.json"):
        if re.fullmatch(r"g\d{6}\.json", path.name):
            numbers.append(int(path.name[1:7]))
    return sorted(numbers)


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _damaged(path: Path, exc: BaseException) -> SemsearchError:
    return SemsearchError(
        f"{path} is damaged ({type(exc).__name__}: {exc}): roll back with 'semsearch rollback' "
        "or rebuild the index with --overwrite"
    )


def _known(cls: type, data: dict) -> dict:
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} is not a JSON object")
    names = {item.name for item in fields(cls)}
    return {key: value for key, value in data.items() if key in names}


def _require(condition: bool, name: str) -> None:
    if not condition:
        raise ValueError(f"field {name}")


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _file_name(value: object) -> bool:
    return isinstance(value, str) and bool(FILE_NAME.fullmatch(value)) and value not in (".", "..")
