"""The live rows of a generation as writers see them: which segment holds each, and its keys.

Writers (add, delete, compact) need ids, text hashes and deletions, not FAISS structures,
so this view reads only small columns and never loads an index file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semsearch.errors import SemsearchError
from semsearch.ingest.conform import Target, convert_column, index_schema
from semsearch.store.folders import IndexFolder
from semsearch.store.manifest import Manifest
from semsearch.store.segment import ID_COLUMN, TEXT_HASH_COLUMN, Segment


@dataclass
class LiveRows:
    """Every stored row of a generation (deleted ones included, marked by `live`)."""

    manifest: Manifest
    segments: list[Segment]
    # _id, _text_hash, the key column if any (the user's id, a chunk's own id), a chunked
    # index's document column, and _segment
    table: pa.Table
    live: np.ndarray

    @classmethod
    def read(cls, folder: IndexFolder, manifest: Manifest) -> LiveRows:
        columns = [ID_COLUMN, TEXT_HASH_COLUMN]
        if manifest.key_column:
            columns.append(manifest.key_column)
        if manifest.chunks is not None and manifest.chunks.document_column not in columns:
            columns.append(manifest.chunks.document_column)
        segments, tables, live = [], [], []
        for position, record in enumerate(manifest.segments):
            segment = Segment(folder.segment_dir(record.name), record)
            table = segment.metadata(columns)
            tables.append(
                table.append_column(
                    "_segment", pa.array(np.full(table.num_rows, position, np.int32))
                )
            )
            segments.append(segment)
            live.append(segment.live_mask())
        if not tables:
            raise SemsearchError(
                f"index {folder.name!r} has no segments: rebuild it with --overwrite"
            )
        table = pa.concat_tables(tables, promote_options="permissive")
        return cls(manifest, segments, table, np.concatenate(live))

    def key_column(self) -> pa.ChunkedArray:
        """What identifies a row: the user's id column (a chunk's own id on a chunked index),
        or else `_id`."""
        return self.table.column(self.manifest.key_column or ID_COLUMN)

    def documents(self, rows: np.ndarray | None = None) -> pa.Array:
        """The document id of each row (of `rows`, else of every live row): the user's id, or
        on a chunked index its chunk's document's; an unchunked index's rows are documents."""
        rows = np.flatnonzero(self.live) if rows is None else rows
        chunks = self.manifest.chunks
        column = self.key_column() if chunks is None else self.table.column(chunks.document_column)
        return column.take(pa.array(rows, pa.int64())).combine_chunks()

    def document_count(self, dropped: np.ndarray | None = None) -> int:
        """How many documents have a live row (not counting the rows `dropped`)."""
        live = self.live.copy()
        if dropped is not None:
            live[dropped] = False
        return int(pc.count_distinct(self.documents(np.flatnonzero(live))).as_py())

    def find(self, keys: pa.Array) -> np.ndarray:
        """For each key, the live row holding it, or -1."""
        live_rows = np.flatnonzero(self.live)
        live_keys = self.key_column().take(pa.array(live_rows))
        keys = _cast_keys(keys, live_keys.type, self.manifest.key_column or "row number")
        where = pc.index_in(keys, value_set=live_keys.combine_chunks()).to_numpy(
            zero_copy_only=False
        )
        found = ~np.isnan(where) if where.dtype.kind == "f" else where >= 0
        if not len(live_rows):  # every row deleted: nothing to find (and nothing to index into)
            return np.full(len(keys), -1, dtype=np.int64)
        positions = np.where(found, np.nan_to_num(where, nan=0), 0).astype(np.int64)
        return np.where(found, live_rows[positions], -1)

    def schema(self) -> pa.Schema:
        """The user's columns over every segment (a column added later is in later ones only)."""
        return index_schema([segment.schema() for segment in self.segments])

    def metadata_at(self, rows: np.ndarray, columns: list[str]) -> pa.Table:
        """The `columns` of global `rows` (null where a segment lacks a column), in `rows` order."""
        schema = self.schema()
        segment_of = self.table.column("_segment").to_numpy()
        starts = np.concatenate([[0], np.cumsum([s.record.rows for s in self.segments])])
        pieces, order = [], []
        for position in np.unique(segment_of[rows]):
            chosen = np.flatnonzero(segment_of[rows] == position)
            segment = self.segments[position]
            present = [name for name in columns if name in segment.schema().names]
            table = segment.metadata(present).take(pa.array(rows[chosen] - starts[position]))
            arrays = [
                table.column(name)
                if name in present
                else pa.nulls(
                    len(chosen), schema.field(name).type if name in schema.names else pa.null()
                )
                for name in columns
            ]
            pieces.append(pa.table(arrays, names=columns))
            order.append(chosen)
        if not pieces:
            return pa.table({name: pa.array([], pa.null()) for name in columns})
        table = pa.concat_tables(pieces, promote_options="permissive")
        return table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))

    def find_hashes(self, hashes: np.ndarray) -> np.ndarray:
        """For each text hash, a live row whose text has it, or -1."""
        live_rows = np.flatnonzero(self.live)
        live_hashes = self.table.column(TEXT_HASH_COLUMN).to_numpy()[live_rows]
        order = np.argsort(live_hashes, kind="stable")
        sorted_hashes = live_hashes[order]
        if len(sorted_hashes) == 0:
            return np.full(len(hashes), -1, dtype=np.int64)
        positions = np.minimum(np.searchsorted(sorted_hashes, hashes), len(sorted_hashes) - 1)
        found = sorted_hashes[positions] == hashes
        return np.where(found, live_rows[order[positions]], -1)

    def deleted_by_segment(self, rows: np.ndarray) -> dict[int, np.ndarray]:
        """The ids to delete in each segment for global `rows`, added to those deleted before."""
        segment_of = self.table.column("_segment").to_numpy()
        ids = self.table.column(ID_COLUMN).to_numpy()
        changes: dict[int, np.ndarray] = {}
        for position in np.unique(segment_of[rows]):
            chosen = ids[rows[segment_of[rows] == position]]
            changes[int(position)] = np.union1d(self.segments[position].deleted_ids(), chosen)
        return changes


def _cast_keys(keys: pa.Array, target: pa.DataType, column: str) -> pa.Array:
    """Keys as the index's id type, only where each stays itself: "01" is not the id 1."""
    if keys.type == target:
        return keys
    cast = convert_column(keys, target, from_text=True)
    if isinstance(cast, str):
        raise SemsearchError(
            f"the id {cast!r} is not one of the index's {column!r} ids ({target}) as written: "
            "give each id exactly as the index holds it"
        )
    return cast


def matched_rows(
    live: LiveRows, table: pa.Table, hashes: np.ndarray, target: Target
) -> tuple[np.ndarray, np.ndarray]:
    """For each new row of an upsert, the live row it replaces (-1: none, by id, or without
    ids by text), and whether it is unchanged: the same text hash and metadata."""
    if target.id_column is not None:
        existing = live.find(table.column(target.id_column).combine_chunks())
    else:  # without ids a row is its text: a text already present is unchanged
        existing = live.find_hashes(hashes)
    old_hashes = live.table.column(TEXT_HASH_COLUMN).to_numpy()
    unchanged = (existing >= 0) & (old_hashes[np.maximum(existing, 0)] == hashes)
    unchanged &= _same_metadata(live, existing, unchanged, table, target)
    return existing, unchanged


def _same_metadata(
    live: LiveRows, existing: np.ndarray, candidates: np.ndarray, table: pa.Table, target: Target
) -> np.ndarray:
    """For each row whose text is unchanged (`candidates`), whether every other column is too:
    an upsert replaces the whole row, so a changed year is a change."""
    same = np.ones(len(existing), dtype=bool)
    rows = np.flatnonzero(candidates)
    if len(rows) == 0:
        return same
    skip = {target.text_column, target.id_column, live.manifest.source.vector_column}
    columns = [name for name in {*target.schema.names, *table.column_names} if name not in skip]
    if not columns:
        return same
    old = live.metadata_at(existing[rows], columns)
    for name in columns:
        before = old.column(name).combine_chunks()
        after = (
            table.column(name).take(pa.array(rows)).combine_chunks()
            if name in table.column_names
            else pa.nulls(len(rows), before.type)
        )
        same[rows] &= _same_values(before, after)
    return same


def _same_values(before: pa.Array, after: pa.Array) -> np.ndarray:
    """Per row, whether two columns hold the same value (null equals null, NaN equals NaN)."""
    try:
        if pa.types.is_null(before.type) != pa.types.is_null(after.type):
            before, after = (
                (before.cast(after.type), after)
                if pa.types.is_null(before.type)
                else (before, after.cast(before.type))
            )
        both_null = pc.and_(pc.is_null(before), pc.is_null(after))
        equal = pc.fill_null(pc.equal(before, after), False)
        if pa.types.is_floating(before.type):
            both_nan = pc.and_(pc.is_nan(before), pc.is_nan(after))
            equal = pc.or_(equal, pc.fill_null(both_nan, False))
        return pc.or_(equal, both_null).to_numpy(zero_copy_only=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):  # lists, structs
        return np.array([a == b for a, b in zip(before.to_pylist(), after.to_pylist())], dtype=bool)
