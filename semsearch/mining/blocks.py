"""Mining one block of query rows on its own, so that workers can share a collection.

A block is a range of query rows whose bounds are multiples of the query chunk, so its
searches are exactly those of the local miner's chunks, and it keeps each pair once with
its best score and at most `top` pairs: any pair among the best `top` of the whole
collection is among the best `top` of the block that found it with that score, so merging
the blocks' pairs and cutting again gives the local result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semsearch.mining.neighbours import SearchStructure, VectorSource, search_in_chunks
from semsearch.mining.pairs import PairAccumulator


@dataclass(frozen=True)
class BlockJob:
    """What every block of one mining job shares, besides the structure and the vectors."""

    rows: np.ndarray  # the collection row of each searched position
    row_count: int
    top_k: int
    query_chunk: int
    threshold: float | None
    top: int | None
    documents: np.ndarray | None = None  # passages of a chunked index: each row's document


def mine_block(
    structure: SearchStructure, vectors: np.ndarray | VectorSource, job: BlockJob, block: range
) -> tuple[np.ndarray, np.ndarray, int]:
    """(pair keys, scores, distinct pairs found) of the queries in `block`; see the module docstring."""
    pairs = PairAccumulator(job.rows, job.row_count, job.threshold, job.documents)
    for neighbours in search_in_chunks(
        structure, vectors, job.top_k, job.query_chunk, queries=block
    ):
        pairs.add(neighbours)
    return pairs.reduce(job.top)


def plan_blocks(rows: int, chunk: int, workers: int, blocks_per_worker: int = 4) -> list[range]:
    """Query rows cut into about `blocks_per_worker` blocks per worker, each a whole number
    of chunks (so the searches are the local miner's)."""
    chunks = -(-rows // chunk)
    per_block = max(1, -(-chunks // (workers * blocks_per_worker)))
    step = per_block * chunk
    return [range(start, min(start + step, rows)) for start in range(0, rows, step)]
