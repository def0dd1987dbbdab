"""`semsearch mine --engine ray`: the local miner, with its encoding and search on a Ray cluster.

The driver reads the collection and builds the local miner's search structure once, puts it
and the vectors into Ray's object store, and an actor pool mines blocks of query rows
against the whole collection (`semsearch.mining.blocks`): each keeps its best pairs, and the
driver merges them in the local miner's accumulator, so the pairs (ids, scores, order) are
the local ones. A corpus file is first encoded by an actor pool (`RayTextEncoder`).
With `--top` each block keeps its best `top` pairs only, so "pairs found" then adds up each
block's count (a pair found from both sides in two blocks counts twice).
"""

from __future__ import annotations

import time
from pathlib import Path

import faiss
import numpy as np

from semsearch.distributed.cluster import RayConnection, RayOptions, require_ray
from semsearch.distributed.encode import RayTextEncoder, job_errors
from semsearch.filesystems import check_local_folder
from semsearch.index.store import DEFAULT_INDEX_DIR
from semsearch.index.vector_index import VectorIndex
from semsearch.mining.blocks import BlockJob, mine_block, plan_blocks
from semsearch.mining.collection import (
    Collection,
    CorpusSource,
    EncodedCollection,
    IndexedCollection,
)
from semsearch.mining.miner import MiningOptions, mine_paraphrases, timed_reading
from semsearch.mining.neighbours import SearchStructure, search_structure
from semsearch.mining.pairs import MiningResult, PairAccumulator


def mine_corpus_on_ray(source: CorpusSource, options: MiningOptions | None = None,
                       ray_options: RayOptions | None = None) -> MiningResult:  # fmt: skip
    """`mine_corpus` with the encoding and the search on Ray."""
    with RayConnection(ray_options or RayOptions(), source.device) as connection:
        started = time.perf_counter()
        collection = EncodedCollection(source, RayTextEncoder(connection, source.model))
        seconds = time.perf_counter() - started
        return timed_reading(
            mine_paraphrases(collection, options, RayPairSearch(connection)), seconds
        )


def mine_index_on_ray(name: str | None, index_dir: Path = DEFAULT_INDEX_DIR,
                      options: MiningOptions | None = None,
                      ray_options: RayOptions | None = None) -> MiningResult:  # fmt: skip
    """`mine_index` with the search on Ray (the index's stored vectors, never re-encoded)."""
    check_local_folder(index_dir, "--index-dir")
    with RayConnection(ray_options or RayOptions(), "cpu") as connection:
        started = time.perf_counter()
        collection = IndexedCollection(name, index_dir)
        seconds = time.perf_counter() - started
        return timed_reading(
            mine_paraphrases(collection, options, RayPairSearch(connection)), seconds
        )


class RayPairSearch:
    """The miner's neighbour search (`SearchPairs`) on an actor pool, one block per call."""

    def __init__(self, connection: RayConnection) -> None:
        self.connection = connection

    def __call__(self, collection: Collection, vectors: np.ndarray, options: MiningOptions,
                 pairs: PairAccumulator, timings: dict[str, float]) -> str:  # fmt: skip
        ray = require_ray()
        workers = self.connection.workers("cpu")  # FAISS searches on CPUs
        started = time.perf_counter()
        structure, description = search_structure(
            vectors, collection.metric, collection.trained_index(), options.nprobe
        )
        shared = [ray.put(faiss.serialize_index(structure.index.faiss)), ray.put(vectors)]
        timings["search_index_setup"] = time.perf_counter() - started
        started = time.perf_counter()
        job = BlockJob(pairs.rows, pairs.row_count, options.top_k, options.query_chunk,
                       pairs.threshold, options.top)  # fmt: skip
        blocks = plan_blocks(len(vectors), options.query_chunk, workers.count)
        workers = workers.at_most(len(blocks))
        dataset = ray.data.from_items([{"start": b.start, "stop": b.stop} for b in blocks]).map_batches(
            BlockMiner, batch_size=1, **workers.actor_args(),
            fn_constructor_kwargs={"shared": shared, "metric": collection.metric,
                                   "params": structure.params, "job": job, "threads": workers.threads},
        )  # fmt: skip
        found = 0
        with job_errors("mining", resumable=False):
            for batch in dataset.iter_batches(batch_format="numpy", batch_size=None):
                real = batch["key"] >= 0
                pairs.add_candidates(batch["key"][real], batch["score"][real])
                found += int(batch["found"].sum())
        if options.top is not None:
            pairs.found_in_blocks = found
        timings["neighbour_search"] = time.perf_counter() - started
        return f"{description}, on Ray ({workers.describe()}, {len(blocks)} blocks)"


class BlockMiner:
    """Ray Data actor: holds the search structure and the vectors, mines the blocks it is given."""

    def __init__(self, shared: list, metric: str, params: dict[str, int], job: BlockJob,
                 threads: int = 1) -> None:  # fmt: skip
        ray = require_ray()
        faiss.omp_set_num_threads(threads)  # the CPUs the actor holds
        index_bytes, self.vectors = ray.get(shared)
        self.structure = SearchStructure(
            VectorIndex(faiss.deserialize_index(index_bytes), metric), params
        )
        self.job = job

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        keys, scores, found = [], [], []
        for start, stop in zip(batch["start"], batch["stop"]):
            block_keys, block_scores, distinct = mine_block(
                self.structure, self.vectors, self.job, range(int(start), int(stop))
            )
            # One row per pair, and a row with key -1 that carries the block's count.
            keys += [block_keys, np.array([-1], np.int64)]
            scores += [block_scores, np.array([np.nan], np.float32)]
            found += [np.zeros(len(block_keys), np.int64), np.array([distinct], np.int64)]
        return {"key": np.concatenate(keys), "score": np.concatenate(scores),
                "found": np.concatenate(found)}  # fmt: skip


__all__ = ["BlockMiner", "RayPairSearch", "mine_corpus_on_ray", "mine_index_on_ray"]
