"""Embeddings written to disk shard by shard, so an interrupted build resumes where it stopped.

Shard i holds the usable rows of source rows [i * shard_rows, (i + 1) * shard_rows): its
metadata as Parquet and its vectors as .npy. The .npy is written last and renamed into
place, so a shard whose vectors exist is complete.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from semsearch.errors import SemsearchError

STATE_FILE = "build_state.json"


class ShardStore:
    """The shards of one build, in `folder/shards/`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / "shards"
        self.folder.mkdir(parents=True, exist_ok=True)

    def has(self, shard: int) -> bool:
        return self._vectors_path(shard).is_file()

    def write(self, shard: int, vectors: np.ndarray, metadata: pa.Table) -> None:
        pq.write_table(metadata, self._metadata_path(shard))
        temporary = self._vectors_path(shard).with_suffix(".tmp.npy")
        np.save(temporary, vectors.astype(np.float32, copy=False))
        os.replace(temporary, self._vectors_path(shard))

    def shard_ids(self) -> list[int]:
        return sorted(
            int(path.stem) for path in self.folder.glob("[0-9]*.npy") if ".tmp" not in path.name
        )

    def vectors(self, shard: int) -> np.ndarray:
        return np.load(self._vectors_path(shard), mmap_mode="r")

    def iter_vectors(self) -> Iterator[np.ndarray]:
        for shard in self.shard_ids():
            yield self.vectors(shard)

    def row_count(self) -> int:
        return sum(len(vectors) for vectors in self.iter_vectors())

    def sample(self, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """`count` vectors drawn uniformly without replacement from all shards, with their rows."""
        sizes = np.array([len(vectors) for vectors in self.iter_vectors()], dtype=np.int64)
        chosen = np.sort(np.random.default_rng(seed).choice(sizes.sum(), size=count, replace=False))
        starts = np.concatenate([[0], np.cumsum(sizes)])
        parts = []
        for position, shard in enumerate(self.shard_ids()):
            inside = chosen[(chosen >= starts[position]) & (chosen < starts[position + 1])]
            if len(inside):
                parts.append(np.asarray(self.vectors(shard)[inside - starts[position]]))
        return chosen, np.concatenate(parts)

    def write_metadata(self, destination: Path) -> None:
        """Concatenate the shards' metadata, in order, into one Parquet file."""
        writer = None
        try:
            for shard in self.shard_ids():
                table = pq.read_table(self._metadata_path(shard))
                if writer is None:
                    writer = pq.ParquetWriter(destination, table.schema)
                elif table.schema != writer.schema:
                    table = _cast_like(table, writer.schema)
                if table.num_rows:
                    writer.write_table(table, row_group_size=64 * 1024)
        finally:
            if writer is not None:
                writer.close()

    def _vectors_path(self, shard: int) -> Path:
        return self.folder / f"{shard:06d}.npy"

    def _metadata_path(self, shard: int) -> Path:
        return self.folder / f"{shard:06d}.parquet"


def read_state(folder: Path) -> dict | None:
    try:
        return json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def write_state(folder: Path, state: dict) -> None:
    (folder / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def _cast_like(table: pa.Table, schema: pa.Schema) -> pa.Table:
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
        raise SemsearchError(
            f"the corpus' column types change part-way through ({exc}): make each column one type"
        ) from exc
