"""Many corpus files cut into numbered parts: which rows of which file each part holds, and
a part's usable rows read from there.

Each file is cut every `part_rows` rows and parts are numbered across the files in name
order, so a part depends on nothing but the files (`FileScan`: what a plan needs of each).
A `ReadUnit` covers a few parts of one file: a Parquet file is read from the row group that
holds the unit's first row, a text file from its beginning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from semsearch.errors import SemsearchError
from semsearch.ingest.parts import RowPart
from semsearch.io.corpus import Corpus, open_corpus, rechunk, usable_rows
from semsearch.io.corpus_readers import corpus_format
from semsearch.io.filesystems import as_location, parquet_file

# Parts one Parquet reader covers: a large file is read by several readers at once.
PARTS_PER_READ = 4


@dataclass(frozen=True)
class FileScan:
    """One file read once before encoding: its rows, those with a text, its hash and ids."""

    path: str  # a local path or a URI in full (`location_text`)
    rows: int
    usable: int
    sha256: str
    ids: pa.Array | None  # the id column's values, to check they are unique across files


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
        parquet = corpus_format(as_location(scan.path)) == "parquet"
        step = parts_per_read if parquet else max(parts, 1)
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


def read_unit(
    unit: ReadUnit, text_column: str | None, part_rows: int, strict: bool = False
) -> Iterator[RowPart]:
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
            yield RowPart(part, chunk, unit.first_id + first_row + np.arange(chunk.num_rows))
        elif part in unit.wanted:
            rows = usable_rows(chunk, text_column, unit.first_id + first_row, strict)
            yield RowPart(part, rows.batch, rows.source_rows)


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
