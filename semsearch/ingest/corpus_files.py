"""A corpus of many files (a folder or a glob, local or a URI): found, checked, and cut into
numbered parts.

Each file is cut every `part_rows` rows, parts are numbered across the files in name order,
and a row's id is its row number across all the files, so a part depends on nothing but the
files: any process, on any node, in any order, can read and encode it, and a build that
stops resumes from the parts already written. For one file this is exactly the local
build's layout. `ManyFilesSource` encodes the parts in this process; `semsearch.distributed`
runs the same reader and encode stage on a Ray cluster.
"""

from __future__ import annotations

import glob
import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tqdm.auto import tqdm

from semsearch.ann.vector_index import VectorIndex
from semsearch.errors import SemsearchError
from semsearch.ingest.build_options import BuildOptions, EncodedRows
from semsearch.ingest.parts import RATE_SMOOTHING, prepare_part, write_parts
from semsearch.ingest.parts import PartRows as PreparedRows
from semsearch.io.corpus import (
    FORMATS,
    GLOB_CHARACTERS,
    Corpus,
    RowFilter,
    open_corpus,
    rechunk,
    scan_columns,
    usable_rows,
)
from semsearch.io.filesystems import (
    RemoteFile,
    as_location,
    file_name,
    is_uri,
    location_sha256,
    location_text,
    parquet_file,
    resolve_uri_files,
)
from semsearch.models.truncation import truncation_report
from semsearch.store.filling import add_parts
from semsearch.store.manifest import SourceSpec
from semsearch.store.segment import Segment, SegmentWriter

log = logging.getLogger(__name__)

# Parts one Parquet reader covers: a large file is read by several readers at once.
PARTS_PER_READ = 4


def resolve_files(corpus: str | Path) -> list[Path] | list[RemoteFile]:
    """The corpus files `corpus` names, sorted: itself, a folder's supported files (hidden
    ones and those of other types left out, as Spark's `_SUCCESS` markers), or a glob's;
    the same for a URI of a pyarrow or fsspec filesystem (`semsearch.io.filesystems`)."""
    if is_uri(corpus):
        return resolve_uri_files(location_text(corpus), _supported)
    path = Path(corpus).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file()
            and _supported(p)
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


@dataclass(frozen=True)
class FileScan:
    """One file read once before encoding: its rows, those with a text, its hash and ids."""

    path: str  # a local path or a URI in full (`location_text`)
    rows: int
    usable: int
    sha256: str
    ids: pa.Array | None  # the id column's values, to check they are unique across files


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
    counts = pc.value_counts(pa.chunked_array(arrays))
    repeated = pc.filter(counts, pc.greater(pc.struct_field(counts, [1]), 1))
    if len(repeated):
        value = repeated[0]["values"].as_py()
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
    lines = "".join(f"{file_name(scan.path)}\t{scan.sha256}\n" for scan in scans)
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ReadUnit:
    """Rows [start, stop) of one file, holding parts `first_part`…; `wanted` are those to write."""

    path: str
    start: int
    stop: int
    first_part: int
    first_id: int  # the id of the file's first row: the rows of the files before it
    wanted: tuple[int, ...]


def plan_units(
    scans: list[FileScan],
    part_rows: int,
    written: Callable[[int], bool],
    parts_per_read: int = PARTS_PER_READ,
) -> list[ReadUnit]:
    """The reads that cover every part not `written` yet. A Parquet file is read in units of
    `parts_per_read` parts (its row groups allow it); a text file is read whole, once."""
    units: list[ReadUnit] = []
    part = first_id = 0
    for scan in scans:
        parts = -(-scan.rows // part_rows)
        step = parts_per_read if _format(scan.path) == "parquet" else max(parts, 1)
        for first in range(0, parts, step):
            count = min(step, parts - first)
            wanted = tuple(p for p in range(part + first, part + first + count) if not written(p))
            if wanted:
                start = (wanted[0] - part) * part_rows
                stop = min(scan.rows, (wanted[-1] - part + 1) * part_rows)
                units.append(ReadUnit(scan.path, start, stop, wanted[0], first_id, wanted))
        part += parts
        first_id += scan.rows
    return units


def part_count(scans: list[FileScan], part_rows: int) -> int:
    return sum(-(-scan.rows // part_rows) for scan in scans)


@dataclass(frozen=True)
class PartRows:
    """A part's usable rows and their ids, ready for `encode_part`."""

    part: int
    batch: pa.RecordBatch
    ids: np.ndarray


def read_unit(
    unit: ReadUnit, text_column: str | None, part_rows: int, strict: bool = False
) -> Iterator[PartRows]:
    """The wanted parts of `unit`, in order, with their usable rows (every row when there is
    no text column: a build of your own vectors alone)."""
    corpus = open_corpus(unit.path)
    batches = _rows_from(corpus, unit.start)
    for offset, chunk in enumerate(rechunk(batches, part_rows)):
        first_row = unit.start + offset * part_rows
        if first_row >= unit.stop:
            break
        part = unit.first_part + offset
        if part in unit.wanted and text_column is None:  # your own vectors alone: all usable
            yield PartRows(part, chunk, unit.first_id + first_row + np.arange(chunk.num_rows))
        elif part in unit.wanted:
            rows = usable_rows(chunk, text_column, unit.first_id + first_row, strict)
            yield PartRows(part, rows.batch, rows.source_rows)


def _rows_from(corpus: Corpus, start: int, batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
    """A file's rows from row `start` on; of a Parquet file only the row groups that hold them
    are read, a text file is read from its beginning."""
    if corpus.format == "parquet":
        batches = _parquet_batches(corpus, start, batch_rows)
        skip = next(batches)
    else:
        batches, skip = corpus.batches(batch_rows), start
    for batch in batches:
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        yield batch.slice(skip)
        skip = 0


def _parquet_batches(corpus: Corpus, start: int, batch_rows: int) -> Iterator:
    """First the rows to skip, then the batches of the row groups from the one holding `start`."""
    try:
        with parquet_file(corpus.path) as parquet:
            offset, groups, skip = 0, [], 0
            for group in range(parquet.metadata.num_row_groups):
                rows = parquet.metadata.row_group(group).num_rows
                if offset + rows > start:
                    skip = skip if groups else start - offset
                    groups.append(group)
                offset += rows
            yield skip
            yield from parquet.iter_batches(batch_size=batch_rows, row_groups=groups)
    except (pa.ArrowException, OSError) as exc:
        raise SemsearchError(
            f"{corpus.path} cannot be read as Parquet ({exc}): check the file"
        ) from exc


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
        resumed = sum(len(unit.wanted) for unit in units) < part_count(
            self.scans, options.part_rows
        )
        total = None if resumed else sum(scan.usable for scan in self.scans)

        def parts() -> Iterator[PreparedRows]:  # runs in the read stage's thread
            for unit in units:
                for part in read_unit(unit, options.text_column, options.part_rows, options.strict):
                    yield prepare_part(part.part, part.batch, part.ids, options.text_column)

        with (
            truncation_report(encoder) as truncated,
            tqdm(
                total=total,
                desc="encoding",
                unit="text",
                disable=not options.show_progress,
                smoothing=RATE_SMOOTHING,
            ) as bar,
        ):
            write_parts(
                encoder, parts(), writer, options.batch_size, bar.update, options.pipeline_depth
            )
        return self.encoded_rows(truncated.cut)

    def encoded_rows(self, truncated: int) -> EncodedRows:
        rows = sum(scan.rows for scan in self.scans)
        skipped = rows - sum(scan.usable for scan in self.scans)
        if skipped:
            log.warning(
                "skipped %d of %d rows with a null or empty %r (--strict makes that an error)",
                skipped,
                rows,
                self.options.text_column,
            )
        return EncodedRows(rows, skipped, truncated)

    def fill(self, index: VectorIndex, segment: Segment, options: BuildOptions) -> None:
        add_parts(
            index,
            segment.iter_parts,
            sum(len(ids) for ids in segment.part_ids),
            options.show_progress,
        )

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


def _supported(path: Path | RemoteFile) -> bool:
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in FORMATS


def _format(path: str) -> str:
    suffixes = [suffix.lower() for suffix in as_location(path).suffixes if suffix.lower() != ".gz"]
    return FORMATS.get(suffixes[-1], "") if suffixes else ""


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
        lines = "".join(
            f"{file_name(corpus.path)}\t{location_sha256(corpus.path)}\n" for corpus in self.corpora
        )
        return hashlib.sha256(lines.encode()).hexdigest()


def open_stream(corpus: str | Path) -> FileStream:
    """The files `corpus` names (a folder, a glob or a URI), checked as one corpus."""
    return FileStream(as_location(corpus), open_all(resolve_files(corpus)))
