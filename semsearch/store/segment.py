"""A segment: an append-only set of rows (vectors, ids, metadata) and its own FAISS index.

A segment folder holds parts written once and never changed (named by `file_names`):

    part-00000.npy          vectors [rows, dimension], float32 or float16
    part-00000.ids.npy      their int64 ids, ascending across the whole segment
    part-00000.parquet      their metadata; `.arrow`: the same as uncompressed Arrow IPC
    part-00000.documents.*  a chunked part's document columns, once per document
    index-g000001.faiss     the FAISS index over the segment (a reindex writes a new one)
    deleted-g000004.npy     ids deleted from the segment as of a generation (sorted)

A part is complete once its vectors file exists (written last, through a temporary name),
so an interrupted build or add resumes from the last complete part.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from semsearch.ann.factory import estimate_bytes
from semsearch.disk import remove, temporary_for
from semsearch.errors import DamagedIndexError, SemsearchError
from semsearch.store.documents import DOCUMENT_ROW_COLUMN, DocumentSplit, join, joined_schema
from semsearch.store.file_names import (
    part_arrow_name,
    part_documents_names,
    part_file_names,
    part_names,
)
from semsearch.store.manifest import CHUNK_COLUMNS, ChunkSpec, Manifest, SegmentRecord
from semsearch.store.part_ids import PartIds, gather

if TYPE_CHECKING:
    from semsearch.ann.vector_index import VectorIndex

ID_COLUMN = "_semsearch_id"
TEXT_HASH_COLUMN = "_semsearch_text_hash"
RESERVED_COLUMNS = (ID_COLUMN, TEXT_HASH_COLUMN, DOCUMENT_ROW_COLUMN)


def internal_columns(manifest: Manifest) -> frozenset[str]:
    """The stored columns semsearch keeps for itself, never listed as the user's (in errors
    and filter lists), so that an index lists the same columns chunked or not: row ids and
    text hashes, and on a chunked index each chunk's own id, number and offsets (a hit
    carries the offsets as its `start` and `end`), its document's row, and the document
    numbers that stand for ids where the user gave no id column (as `_semsearch_id` does
    on another index)."""
    names = {*RESERVED_COLUMNS}
    if manifest.chunks is not None:
        names |= {*CHUNK_COLUMNS}
        if manifest.id_column is None:
            names.add(manifest.chunks.document_column)
    return frozenset(names)


def document_split(chunking: ChunkSpec | None, text_column: str) -> DocumentSplit | None:
    """How a chunked index's parts are split into chunk rows and documents; None unchunked."""
    if chunking is None:
        return None
    chunk_columns = {ID_COLUMN, TEXT_HASH_COLUMN, *CHUNK_COLUMNS, text_column}
    chunk_columns.add(chunking.document_column)  # on both sides: add and delete read it
    return DocumentSplit(chunking.document_column, frozenset(chunk_columns))


def segment_bytes(rows: int, dimension: int, vector_dtype: str, factory: str) -> int:
    """About what a segment of `rows` vectors takes on disk: its vectors and its FAISS index
    (metadata not counted); what a writer checks against the free space before writing."""
    vectors = rows * dimension * np.dtype(vector_dtype).itemsize
    return vectors + (estimate_bytes(factory, rows, dimension) or 0)


def index_file_name(generation: int) -> str:
    return f"index-g{generation:06d}.faiss"


class SegmentWriter:
    """Writes the parts of one segment into `folder`."""

    def __init__(
        self, folder: Path, vector_dtype: str = "float32", split: DocumentSplit | None = None
    ) -> None:
        """`split`: a chunked index's, whose documents are stored once (`document_split`)."""
        self.folder = folder
        self.vector_dtype = vector_dtype
        self.split = split
        folder.mkdir(parents=True, exist_ok=True)

    def has(self, part: int) -> bool:
        return _vectors_path(self.folder, part).is_file()

    def write(self, part: int, ids: np.ndarray, vectors: np.ndarray, metadata: pa.Table) -> None:
        """Write one part; the vectors file goes last, so its presence means a complete part."""
        if not (len(ids) == len(vectors) == metadata.num_rows):
            raise ValueError("a part needs as many ids, vectors and metadata rows")
        try:
            if self.split is not None:
                metadata, documents = self.split.split(metadata)
                documents_parquet, documents_arrow = part_documents_names(part)
                _write_parquet(documents, self.folder / documents_parquet)
                _write_arrow(documents, self.folder / documents_arrow)
            _write_parquet(metadata, _metadata_path(self.folder, part))
            _write_arrow(metadata, self.folder / part_arrow_name(part))
            _save_npy(_ids_path(self.folder, part), np.asarray(ids, dtype=np.int64))
            vectors = np.asarray(vectors, dtype=self.vector_dtype)
            _save_npy(_vectors_path(self.folder, part), vectors)
        except BaseException:  # a full disk, an interrupt: no half part is left behind
            for name in part_names(part):
                (self.folder / name).unlink(missing_ok=True)
            raise

    def keep_finished_parts(self) -> int:
        """Remove every file here but the complete parts' (a part being written, an index,
        a BM25 part, temporaries): what a build stopped by a full disk keeps to resume from.
        The number of parts kept."""
        finished = self.part_count()
        keep = {name for part in range(finished) for name in part_names(part)}
        for path in list(self.folder.iterdir()) if self.folder.is_dir() else []:
            if path.name not in keep:
                remove(path)
        return finished

    def part_count(self) -> int:
        count = 0
        while self.has(count):
            count += 1
        return count

    def rows_written(self) -> int:
        """Rows in the complete parts already here (those an interrupted build wrote)."""
        complete = self.folder.glob("part-[0-9][0-9][0-9][0-9][0-9].npy")
        return sum(
            len(np.load(_ids_path(self.folder, int(path.stem[5:])), mmap_mode="r"))
            for path in complete
        )


class Segment:
    """A finished segment folder, read lazily: ids, vectors and metadata are memory-mapped."""

    def __init__(self, folder: Path, record: SegmentRecord) -> None:
        self.folder = folder
        self.record = record

    @property
    def name(self) -> str:
        return self.record.name

    def in_generation(self, record: SegmentRecord) -> Segment:
        """This segment as another generation's `record` has it (only deletions differ),
        sharing the ids already read: a segment's rows never change once written."""
        other = Segment(self.folder, record)
        for name in ("part_ids", "part_starts", "id_lookup"):
            if name in self.__dict__:
                other.__dict__[name] = self.__dict__[name]
        return other

    @cached_property
    def part_ids(self) -> list[np.ndarray]:
        return [self._load(_ids_path(self.folder, part)) for part in range(self.record.parts)]

    @cached_property
    def part_starts(self) -> np.ndarray:
        """The position of each part's first row in the segment, and the segment's rows last."""
        return np.cumsum([0, *(len(ids) for ids in self.part_ids)])

    @cached_property
    def id_lookup(self) -> PartIds:
        """The ids searched in place (no copy of them all), checked against the manifest's row
        count."""
        lookup = PartIds(self.part_ids)
        if len(lookup) != self.record.rows:
            raise DamagedIndexError(
                f"segment {self.folder} holds {len(lookup)} rows, the manifest says "
                f"{self.record.rows}: roll back or rebuild the index with --overwrite"
            )
        return lookup

    def part_vectors(self, part: int) -> np.ndarray:
        return self._load(_vectors_path(self.folder, part))

    def part_vectors_for_random_reads(self, part: int) -> np.ndarray:
        """The part's vectors memory-mapped without the kernel's read-around (MADV_RANDOM).

        Re-scoring reads a few rows of 768 bytes at random; read-around fetched 128 KiB about
        each. At 20M rows 1,000 queries left 4.1 GB of file pages, and a process limited to
        4 GiB thrashed at 268 ms a query."""
        path = _vectors_path(self.folder, part)
        try:
            with open(path, "rb") as handle:
                version = np.lib.format.read_magic(handle)
                read_header = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                shape, fortran_order, dtype = read_header(handle)
                offset = handle.tell()
                mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            if hasattr(mmap, "MADV_RANDOM"):  # not on every platform
                mapped.madvise(mmap.MADV_RANDOM)
            order = "F" if fortran_order else "C"
            return np.ndarray(shape, dtype, buffer=mapped, offset=offset, order=order)
        except (OSError, ValueError, TypeError) as exc:  # TypeError: data cut short
            raise _unreadable(path, exc) from exc

    def iter_parts(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, vectors) of each part in order; vectors as stored (float32 or float16)."""
        for part in range(self.record.parts):
            yield self.part_ids[part], self.part_vectors(part)

    def vectors_at(self, positions: np.ndarray) -> np.ndarray:
        """float32 vectors of the rows at `positions` (ascending) in the segment."""
        output = np.empty((len(positions), self._dimension()), dtype=np.float32)
        return gather(self.part_starts, positions, self.part_vectors, output)

    def positions_of(self, ids: np.ndarray) -> np.ndarray:
        """Positions of `ids` in the segment, -1 for ids it does not hold."""
        return self.id_lookup.positions_of(ids)

    def metadata(self, columns: list[str] | None = None) -> pa.Table:
        """The metadata of every stored row, in position order, memory-mapped."""
        return _concat(list(self.iter_metadata(columns)))

    def iter_metadata(self, columns: list[str] | None = None) -> Iterator[pa.Table]:
        """The metadata part by part: one part's rows in memory at a time."""
        for part in range(self.record.parts):
            yield self.part_metadata(part, columns)

    def part_metadata(self, part: int, columns: list[str] | None = None) -> pa.Table:
        """One part's metadata rows (a chunked part's joined with its documents), from the
        Parquet, memory-mapped; of `columns` only (those present) when given."""
        import pyarrow.parquet as pq

        path = _metadata_path(self.folder, part)
        if not self.record.documents:
            return pq.read_table(path, columns=columns, memory_map=True)
        documents = pq.read_table(self.documents_paths()[part], memory_map=True)
        return join(pq.read_table(path, memory_map=True), documents, columns)

    def metadata_paths(self) -> list[Path]:
        """The Parquet file of each part, in order (a chunked part's chunk rows)."""
        return [_metadata_path(self.folder, part) for part in range(self.record.parts)]

    def metadata_files(self) -> list[Path | tuple[Path, Path]]:
        """Each part's Parquet, paired with its documents table's where it has one: what
        `--where` reads (`semsearch.search.where`)."""
        if not self.record.documents:
            return self.metadata_paths()
        return list(zip(self.metadata_paths(), self.documents_paths()))

    def documents_paths(self) -> list[Path]:
        """The Parquet documents table of each part, where `record.documents`."""
        return [self.folder / part_documents_names(part)[0] for part in range(self.record.parts)]

    def documents_arrow_path(self, part: int) -> Path:
        return self.folder / part_documents_names(part)[1]

    def arrow_path(self, part: int) -> Path:
        """The part's metadata as Arrow IPC (where `record.metadata_arrow`)."""
        return self.folder / part_arrow_name(part)

    def schema(self) -> pa.Schema:
        """The metadata's columns and types (every part has the same), from the Arrow copy
        where there is one: a query then never imports pyarrow.parquet (a few hundredths of
        a second of a cold query)."""
        arrow = self.record.metadata_arrow
        schema = stored_schema(self.arrow_path(0) if arrow else _metadata_path(self.folder, 0))
        if not self.record.documents:
            return schema
        documents = self.documents_arrow_path(0) if arrow else self.documents_paths()[0]
        return joined_schema(schema, stored_schema(documents))

    def deleted_ids(self) -> np.ndarray:
        if self.record.deleted_file is None:
            return np.empty(0, dtype=np.int64)
        deleted = self._load(self.folder / self.record.deleted_file)
        if len(deleted) != self.record.deleted:
            raise DamagedIndexError(
                f"{self.folder / self.record.deleted_file} lists {len(deleted)} deleted rows, the "
                f"manifest says {self.record.deleted}: roll back or rebuild the index"
            )
        return deleted

    def live_mask(self) -> np.ndarray:
        """True for each stored row that is not deleted."""
        mask = np.ones(self.record.rows, dtype=bool)
        deleted = self.deleted_ids()
        if len(deleted):
            positions = self.positions_of(deleted)
            mask[positions[positions >= 0]] = False
        return mask

    def read_index(self, metric: str, mapped: bool = False) -> VectorIndex:
        """The segment's FAISS index, refused when its size, row count or metric is not the
        manifest's (FAISS records the metric it was built for)."""
        from semsearch.ann.vector_index import METRICS, VectorIndex  # FAISS once an index opens

        path = self.folder / self.record.index_file
        index = VectorIndex.read(path, metric, self.record.index_file_bytes, mapped)
        if index.faiss.metric_type != METRICS[metric]:
            built_for = "/".join(
                name for name, value in METRICS.items() if value == index.faiss.metric_type
            )
            raise DamagedIndexError(
                f"{path} was built for the {built_for or 'another'} metric but the manifest says "
                f"{metric}: the manifest was edited; roll back or rebuild the index with --overwrite"
            )
        held = np.asarray(self.record.held_out, dtype=np.int64)
        if index.size + len(held) != self.record.rows:
            raise DamagedIndexError(
                f"{self.folder / self.record.index_file} holds {index.size} vectors, the manifest "
                f"says {self.record.rows - len(held)}: roll back or rebuild the index with "
                "--overwrite"
            )
        if not len(held):
            return index
        from semsearch.store.held_out import HeldOutIndex, exact_side

        positions = self.positions_of(held)  # its tuning sample, kept apart
        if positions.min() < 0:
            raise DamagedIndexError(
                f"segment {self.folder}: the manifest holds out rows it does not store: roll "
                "back or rebuild the index with --overwrite"
            )
        order = np.argsort(positions)
        vectors = self.vectors_at(positions[order])
        return HeldOutIndex(index, exact_side(vectors, held[order], metric, index.dimension))

    def _dimension(self) -> int:
        return int(self.part_vectors(0).shape[1]) if self.record.parts else 0

    def _load(self, path: Path) -> np.ndarray:
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise _unreadable(path, exc) from exc


def stored_schema(path: Path) -> pa.Schema:
    """A metadata file's columns: an Arrow IPC copy's (pyarrow.parquet then stays unimported)
    or a Parquet file's footer."""
    if path.suffix == ".arrow":
        with pa.memory_map(str(path)) as source:
            return pa.ipc.open_file(source).schema
    import pyarrow.parquet as pq

    return pq.read_schema(path)


def _unreadable(path: Path, exc: Exception) -> DamagedIndexError:
    return DamagedIndexError(
        f"{path} cannot be read ({type(exc).__name__}): roll back or rebuild the index"
    )


def write_deleted(folder: Path, generation: int, ids: np.ndarray) -> str:
    """Write the segment's deleted ids as of `generation`; the file's name."""
    name = f"deleted-g{generation:06d}.npy"
    _save_npy(folder / name, np.unique(np.asarray(ids, dtype=np.int64)))
    return name


def _save_npy(path: Path, array: np.ndarray) -> None:
    # np.save adds `.npy` to a name without it: the temporary keeps that suffix.
    with temporary_for(path, path.with_name(f".{path.stem}.tmp.npy")) as temporary:
        np.save(temporary, np.ascontiguousarray(array))


def _write_parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    with temporary_for(path) as temporary:
        pq.write_table(table, temporary, row_group_size=64 * 1024)


def _write_arrow(table: pa.Table, path: Path) -> None:
    """The metadata as one uncompressed Arrow IPC batch: memory-mapped, a row's cells are read
    in place (`semsearch.store.metadata_parts`), where Parquet decodes a whole row group."""
    table = table.combine_chunks()
    with (
        temporary_for(path) as temporary,
        pa.OSFile(str(temporary), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as writer,
    ):
        writer.write_table(table, max_chunksize=max(table.num_rows, 1))


def _concat(tables: list[pa.Table]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SemsearchError(
            f"the metadata's column types differ between parts ({exc}): make each column one type"
        ) from exc


def _vectors_path(folder: Path, part: int) -> Path:
    return folder / part_file_names(part)[0]


def _ids_path(folder: Path, part: int) -> Path:
    return folder / part_file_names(part)[1]


def _metadata_path(folder: Path, part: int) -> Path:
    return folder / part_file_names(part)[2]
