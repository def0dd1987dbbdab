"""A corpus of many files (a folder or a glob, local or a URI): found, checked, and encoded
part by part in this process.

Parts are numbered across the files in name order and a row's id is its row number across
all of them (`semsearch.ingest.file_parts`), so any process, on any node, in any order, can
encode a part, and a stopped build resumes from the parts written; for one file this is the
local build's layout. `semsearch.distributed` runs the same reader on a Ray cluster.
"""

from __future__ import annotations

import glob
import hashlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from semsearch.errors import SemsearchError
from semsearch.ingest.build_options import BuildOptions, EncodedRows, counted_rows
from semsearch.ingest.file_parts import FileScan, part_count, plan_units, read_unit
from semsearch.ingest.parts import encode_parts
from semsearch.io.corpus import (
    Corpus,
    RowFilter,
    first_repeated,
    open_corpus,
    scan_columns,
)
from semsearch.io.corpus_readers import corpus_format
from semsearch.io.filesystems import (
    GLOB_CHARACTERS,
    RemoteFile,
    as_location,
    file_name,
    is_uri,
    location_sha256,
    location_text,
    resolve_uri_files,
)
from semsearch.models.truncation import truncation_report
from semsearch.store.manifest import SourceSpec
from semsearch.store.segment import SegmentWriter

log = logging.getLogger(__name__)


def resolve_files(corpus: str | Path) -> list[Path] | list[RemoteFile]:
    """The corpus files `corpus` names, sorted: itself, a folder's supported files (hidden
    ones and those of other types left out, as Spark's `_SUCCESS` markers), or a glob's;
    the same for a URI of a pyarrow or fsspec filesystem (`semsearch.io.filesystems`)."""
    if is_uri(corpus):
        return resolve_uri_files(location_text(corpus), corpus_format)
    path = Path(corpus).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file()
            and corpus_format(p) is not None
            and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)
        )
        if not files:
            raise SemsearchError(
                f"folder {path} holds no .parquet, .csv, .tsv or .jsonl files (optionally .gz)"
            )
        return files
    if not any(character in str(corpus) for character in GLOB_CHARACTERS):
        raise SemsearchError(f"corpus {path} does not exist: check the path")
    files = sorted(
        Path(name) for name in glob.glob(str(path), recursive=True) if Path(name).is_file()
    )
    if not files:
        raise SemsearchError(
            f"no file matches {corpus}: check the pattern (quote it, so the shell leaves it alone)"
        )
    return files


def open_all(files: list[Path] | list[RemoteFile]) -> list[Corpus]:
    """Open every file and check they are one format with the same columns and types."""
    corpora = [open_corpus(path) for path in files]
    first = corpora[0]
    for corpus in corpora[1:]:
        if corpus.format != first.format:
            raise SemsearchError(
                f"{corpus.path.name} is {corpus.format} but {first.path.name} is {first.format}: "
                "give files of one format"
            )
        _check_same_columns(first, corpus)
    return corpora


def _check_same_columns(first: Corpus, other: Corpus) -> None:
    theirs = {field.name: field.type for field in other.schema}
    ours = {field.name: field.type for field in first.schema}
    if list(theirs) != list(ours):
        missing = [name for name in ours if name not in theirs]
        extra = [name for name in theirs if name not in ours]
        detail = (
            f"lacks {', '.join(map(repr, missing))}"
            if missing
            else f"adds {', '.join(map(repr, extra))}"
            if extra
            else "orders them differently"
        )
        raise SemsearchError(
            f"the files' columns disagree: {other.path.name} {detail} (against {first.path.name}): "
            "give files with the same columns"
        )
    for name, data_type in ours.items():
        if theirs[name] != data_type:
            raise SemsearchError(
                f"the files' columns disagree: {name!r} is {theirs[name]} in {other.path.name} "
                f"but {data_type} in {first.path.name}: give each column one type in every file"
            )


def scan_file(path: str, text_column: str, id_column: str | None, strict: bool) -> FileScan:
    """Count `path`'s rows and usable rows, check its texts and ids, and hash it."""
    corpus = open_corpus(path)
    scan = scan_columns(corpus, text_column, id_column, strict)
    id_values = None
    if id_column is not None:
        id_values = pa.chunked_array(scan.ids, corpus.schema.field(id_column).type).combine_chunks()
    return FileScan(
        location_text(path), scan.rows, scan.usable, location_sha256(corpus.path), id_values
    )


def check_unique_ids(scans: list[FileScan], id_column: str) -> None:
    """Refuse an id that two files share (each file was checked on its own when scanned)."""
    arrays = [scan.ids for scan in scans if scan.ids is not None and len(scan.ids)]
    if len(arrays) < 2:
        return
    value = first_repeated(pa.chunked_array(arrays))
    if value is not None:
        where = [
            file_name(scan.path)
            for scan in scans
            if scan.ids is not None
            and pc.any(pc.equal(scan.ids, pa.scalar(value, scan.ids.type))).as_py()
        ]
        raise SemsearchError(
            f"id {value!r} appears in more than one file ({' and '.join(where[:2])}) in "
            f"{id_column!r}: ids must be unique across the files"
        )


def fingerprint(scans: list[FileScan]) -> str:
    """One file's sha256, or a hash of every file's name and sha256 for many."""
    if len(scans) == 1:
        return scans[0].sha256
    return files_digest((scan.path, scan.sha256) for scan in scans)


def files_digest(files: Iterable[tuple[str | Path | RemoteFile, str]]) -> str:
    """The sha256 of a line per file, its name and its sha256, in order."""
    lines = "".join(f"{file_name(path)}\t{sha256}\n" for path, sha256 in files)
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


class ManyFilesSource:
    """The files of a folder or a glob, encoded part by part in this process (a `PartSource`)."""

    def __init__(self, options: BuildOptions) -> None:
        self.files = resolve_files(options.corpus)
        self.corpora = open_all(self.files)
        RowFilter(options.text_column, options.id_column).check_columns(self.corpora[0])
        self.name = str(as_location(options.corpus)) if len(self.files) > 1 else self.files[0].name
        self.options = options
        self.scans: list[FileScan] = []

    def usable_rows(self) -> int:
        self.scans = self.scan()
        if self.options.id_column is not None:
            check_unique_ids(self.scans, self.options.id_column)
        return sum(scan.usable for scan in self.scans)

    def scan(self) -> list[FileScan]:
        options = self.options
        return [
            scan_file(location_text(path), options.text_column, options.id_column, options.strict)
            for path in self.files
        ]

    def fingerprint(self) -> str:
        return fingerprint(self.scans)

    def encode_parts(self, encoder, writer: SegmentWriter, options: BuildOptions) -> EncodedRows:
        units = plan_units(self.scans, options.part_rows, writer.has)
        todo = sum(len(unit.wanted) for unit in units)
        resumed = todo < part_count(self.scans, options.part_rows)
        parts = (
            part
            for unit in units
            for part in read_unit(unit, options.text_column, options.part_rows, options.strict)
        )
        with truncation_report(encoder) as truncated:
            encode_parts(
                encoder,
                parts,
                writer,
                options.text_column,
                batch_size=options.batch_size,
                show_progress=options.show_progress,
                total=None if resumed else sum(scan.usable for scan in self.scans),
                depth=options.pipeline_depth,
                save_slices=True,
            )
        return self.encoded_rows(truncated.cut)

    def encoded_rows(self, truncated: int) -> EncodedRows:
        rows = sum(scan.rows for scan in self.scans)
        skipped = rows - sum(scan.usable for scan in self.scans)
        return counted_rows(rows, skipped, truncated, self.options.text_column)

    def source_spec(self, rows: EncodedRows, options: BuildOptions) -> SourceSpec:
        many = as_location(options.corpus)
        path = (
            self.files[0].resolve()
            if len(self.files) == 1
            else many
            if is_uri(many)
            else many.absolute()
        )
        return SourceSpec(
            path=str(path),
            format=self.corpora[0].format,
            sha256=self.fingerprint(),
            rows_read=rows.read,
            rows_skipped=rows.skipped,
            text_column=options.text_column,
            id_column=options.id_column,
        )

    def operation(self) -> dict:
        return {"files": len(self.files)}


@dataclass
class FileStream:
    """Many corpus files (local, or named by a URI) read one after the other as one corpus:
    what a chunked build reads (its chunk rows are numbered over the whole stream, so parts
    cannot be planned by each file's row ranges as `ManyFilesSource` plans them)."""

    path: Path | RemoteFile
    corpora: list[Corpus]
    num_rows: int | None = None

    @property
    def format(self) -> str:
        return self.corpora[0].format

    @property
    def schema(self) -> pa.Schema:
        return self.corpora[0].schema

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def batches(
        self, rows: int = 8192, columns: list[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        for corpus in self.corpora:
            yield from corpus.batches(rows, columns)

    def fingerprint(self) -> str:
        """A hash of every file's name and sha256, in order."""
        return files_digest((corpus.path, location_sha256(corpus.path)) for corpus in self.corpora)


def open_stream(corpus: str | Path) -> FileStream:
    """The files `corpus` names (a folder, a glob or a URI), checked as one corpus."""
    return FileStream(as_location(corpus), open_all(resolve_files(corpus)))
