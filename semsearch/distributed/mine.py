"""`semsearch mine --engine ray`: the local miner, with its encoding and search on a Ray cluster.

An actor pool mines blocks of query rows (`semsearch.mining.blocks`): each actor opens the
index folder itself (a filesystem every node mounts at the same path) and fills the local
miner's structure from the stored vectors, memory-mapped; a structure to train is trained
once, by one task. The driver merges the blocks' best pairs in the local miner's
accumulator, so the pairs are the local ones, and never holds an [n, d] array. A corpus is
first built by the Ray build into a temporary flat index in `--work-dir`, removed after.
With `--top`, "pairs found" adds up each block's count (a pair found from both sides counts
twice).
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from semsearch import phases
from semsearch.ann.vector_index import VectorIndex
from semsearch.distributed.build import RaySource
from semsearch.distributed.cluster import RayConnection, RayOptions, Workers, require_ray
from semsearch.distributed.encode import job_errors
from semsearch.errors import ResumableError, SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.io.filesystems import check_local_folder, file_name
from semsearch.mining.blocks import BlockJob, mine_block, plan_blocks
from semsearch.mining.collection import (
    CorpusSource,
    IndexedCollection,
    SearchedVectors,
    StoredVectors,
)
from semsearch.mining.documents import DocumentCollection
from semsearch.mining.miner import (
    MiningOptions,
    SearchPairs,
    mine_paraphrases,
    search_pairs_locally,
)
from semsearch.mining.neighbours import (
    StructurePlan,
    build_structure,
    plan_structure,
    train_structure,
)
from semsearch.mining.pairs import MiningResult, PairAccumulator
from semsearch.models.model_folder import resolve_model
from semsearch.phases import phase
from semsearch.store.folders import DEFAULT_INDEX_DIR, IndexFolder
from semsearch.store.manifest import Manifest

# The temporary index of a corpus mined on Ray: WORK_PREFIX + a random part, in --work-dir.
WORK_PREFIX = "semsearch-mine-"
WORK_INDEX = "corpus"


def mine_corpus_on_ray(
    source: CorpusSource,
    options: MiningOptions | None = None,
    ray_options: RayOptions | None = None,
    work_dir: str | Path | None = None,
) -> MiningResult:
    """`mine_corpus` with the encoding and the search on Ray, the vectors never on the driver.

    `work_dir` holds the temporary index: a folder every node mounts at the same path
    (default: this machine's temporary folder, enough for a Ray instance on this machine).
    """
    with RayConnection(ray_options or RayOptions(), source.device) as connection:

        def build(build_options: BuildOptions) -> IndexFolder:
            part_source = RaySource(build_options, connection)  # the files checked, then Ray
            if work_dir is None:
                _check_one_node(connection)
            return build_index(build_options, None, part_source)

        return mine_corpus_as_index(
            source, options, work_dir, build, RayIndexPairSearch(connection)
        )


def mine_corpus_as_index(
    source: CorpusSource,
    options: MiningOptions | None,
    work_dir: str | Path | None,
    build: Callable[[BuildOptions], IndexFolder],
    search_pairs: SearchPairs,
) -> MiningResult:
    """`source` built by `build` into a temporary index in `work_dir`, mined by
    `search_pairs` as the local corpus miner would (same rows, ids, name and counts), and
    removed whatever happens: nothing half-written stays behind."""
    options = options or MiningOptions()
    options.check(source.metric)  # before anything is encoded
    folder = _work_folder(work_dir)
    try:
        with phases.timing():  # the build's phases, then the mining's, on one timer
            try:
                index = build(_build_options(source, folder, options.show_progress))
            except ResumableError as exc:  # nothing is kept to resume from
                raise SemsearchError(
                    f"{exc.failure}: run the mining again (on a cluster, with a --work-dir "
                    "every node mounts)"
                ) from exc
            with phase("read"):
                collection = IndexedCollection(index.name, folder)
                collection.name = file_name(source.path)  # the local corpus miner's name for it
                collection.rows_skipped = collection.manifest.source.rows_skipped
            return mine_paraphrases(collection, options, search_pairs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _check_one_node(connection: RayConnection) -> None:
    """This machine's temporary folder is no other node's: a cluster needs a --work-dir."""
    connection.workers()  # joins Ray
    nodes = [node for node in require_ray().nodes() if node.get("Alive")]
    if len(nodes) > 1:
        raise SemsearchError(
            f"the Ray cluster has {len(nodes)} nodes, which cannot all see this machine's "
            "temporary folder: give --work-dir, a folder every node mounts at the same path"
        )


def _work_folder(work_dir: str | Path | None) -> Path:
    """A new, empty folder for the temporary index, inside `work_dir` (made if missing)."""
    if work_dir is not None:
        check_local_folder(work_dir, "--work-dir")
    parent = Path(work_dir) if work_dir is not None else Path(tempfile.gettempdir())
    try:
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=parent)).absolute()
    except OSError as exc:
        raise SemsearchError(
            f"cannot make a temporary index in --work-dir {parent} ({exc.strerror or exc}): "
            "choose a folder you can write to (on a cluster, one every node mounts)"
        ) from None


def _build_options(source: CorpusSource, folder: Path, show_progress: bool) -> BuildOptions:
    """A build that stores what mining reads (texts, ids, vectors) and no more: a flat index
    (so the miner plans the local corpus miner's structure), untuned, without BM25. Its
    texts are encoded as the local miner encodes them: after the query prompt."""
    prompt = source.query_prompt
    if prompt is None:
        prompt = resolve_model(source.model).prompts.query
    return BuildOptions(
        corpus=source.path,
        name=WORK_INDEX,
        text_column=source.text_column,
        id_column=source.id_column,
        model=source.model,
        index="flat",
        metric=source.metric,
        batch_size=source.batch_size,
        device=source.device,
        query_prompt=prompt,
        document_prompt=prompt,  # mining is symmetric: every text is a "query"
        out_dir=folder,
        show_progress=show_progress,
        target_recall=None,
        lexical=None,
        chunking="off",  # the local corpus miner encodes each text whole, never in chunks
    )


def mine_index_on_ray(
    name: str | None,
    index_dir: Path = DEFAULT_INDEX_DIR,
    options: MiningOptions | None = None,
    ray_options: RayOptions | None = None,
) -> MiningResult:
    """`mine_index` with the search on Ray: the workers read the index's stored vectors (never
    re-encoded) from the shared folder; the driver reads its texts and ids only."""
    check_local_folder(index_dir, "--index-dir")
    with RayConnection(ray_options or RayOptions(), "cpu") as connection, phases.timing():
        with phase("read"):
            collection = IndexedCollection(name, index_dir)
        return mine_paraphrases(collection, options, RayIndexPairSearch(connection))


@dataclass(frozen=True)
class StoredIndex:
    """Where a worker finds an index's vectors: its folder (absolute) and the manifest the
    driver read (so every worker opens the same generation)."""

    folder: str
    manifest: Manifest

    def open(self) -> StoredVectors:
        folder = IndexFolder(Path(self.folder))
        if not folder.manifest_file.is_file():
            raise SemsearchError(
                f"a Ray worker on {socket.gethostname()} cannot see the index folder {self.folder}: "
                "mining on Ray reads the index on every node, so keep it on a filesystem every "
                "node mounts at the same path"
            )
        return StoredVectors(folder, self.manifest)


class RayIndexPairSearch:
    """The miner's neighbour search (`SearchPairs`) of an index on an actor pool that reads
    the stored vectors itself; see the module docstring."""

    def __init__(self, connection: RayConnection) -> None:
        self.connection = connection

    def __call__(
        self,
        collection: IndexedCollection | DocumentCollection,
        options: MiningOptions,
        pairs: PairAccumulator,
    ) -> str:
        if isinstance(collection, DocumentCollection):
            # A chunked index's documents are pooled from its passages on the driver, and
            # their vectors (one a document) searched there.
            structure = search_pairs_locally(collection, options, pairs)
            return f"{structure}, documents pooled and searched on the driver"
        ray = require_ray()
        workers = self.connection.workers("cpu")  # FAISS searches on CPUs
        with phase("index"):
            return self._search(ray, workers, collection, options, pairs)

    def _search(
        self,
        ray,
        workers: Workers,
        collection: IndexedCollection,
        options: MiningOptions,
        pairs: PairAccumulator,
    ) -> str:
        """The structure planned (and trained once, on Ray), then the blocks mined."""
        stored = collection.stored
        index = StoredIndex(str(collection.folder.path.resolve()), collection.manifest)
        plan = plan_structure(
            len(pairs.rows),
            stored.dimension,
            collection.metric,
            stored.trained_index(),
            options.nprobe,
        )
        trained = None
        if plan.kind == "train":  # once, by one task, on the local miner's sample
            task = ray.remote(train_for_mining).options(num_cpus=workers.num_cpus)
            with job_errors("training the mining structure", resumable=False):
                trained = [ray.put(ray.get(task.remote(index, pairs.rows, plan, workers.threads)))]
        job = _block_job(pairs, options)
        constructor = {"index": index, "plan": plan, "trained": trained}
        with phase("search"):  # the workers fill their structures and search; pairs merged
            return f"{plan.about}, on Ray " + _mine_blocks(
                constructor, workers, job, pairs, options
            )


def train_for_mining(
    index: StoredIndex, rows: np.ndarray, plan: StructurePlan, threads: int = 1
) -> bytes:
    """On a worker: the local miner's IVF structure trained on its sample of `rows`, empty,
    serialized (the centroids only: small next to the vectors)."""
    faiss.omp_set_num_threads(threads)
    source = SearchedVectors(index.open(), rows)
    return faiss.serialize_index(train_structure(source, plan.metric).faiss)


def _block_job(pairs: PairAccumulator, options: MiningOptions) -> BlockJob:
    return BlockJob(
        pairs.rows,
        pairs.row_count,
        options.top_k,
        options.query_chunk,
        pairs.threshold,
        options.top,
        pairs.documents,  # passages of one document never pair, on a worker as here
    )


def _mine_blocks(
    constructor: dict,
    workers: Workers,
    job: BlockJob,
    pairs: PairAccumulator,
    options: MiningOptions,
) -> str:
    """Every block of query rows mined by a pool of `IndexBlockMiner`s, their best pairs
    merged into `pairs`; the pool in a few words."""
    ray = require_ray()
    blocks = plan_blocks(len(job.rows), options.query_chunk, workers.count)
    workers = workers.at_most(len(blocks))
    dataset = ray.data.from_items([{"start": b.start, "stop": b.stop} for b in blocks]).map_batches(
        IndexBlockMiner,
        batch_size=1,
        **workers.actor_args(),
        fn_constructor_kwargs={**constructor, "job": job, "threads": workers.threads},
    )
    found = 0
    with job_errors("mining", resumable=False):
        for batch in dataset.iter_batches(batch_format="numpy", batch_size=None):
            real = batch["key"] >= 0
            pairs.add_candidates(batch["key"][real], batch["score"][real])
            found += int(batch["found"].sum())
    if options.top is not None:
        pairs.found_in_blocks = found
    return f"({workers.describe()}, {len(blocks)} blocks)"


class IndexBlockMiner:
    """Ray Data actor: opens the index, fills the planned structure from its stored vectors
    (memory-mapped, a FAISS add batch at a time) and mines the blocks it is given."""

    def __init__(
        self,
        index: StoredIndex,
        plan: StructurePlan,
        trained: list | None,
        job: BlockJob,
        threads: int = 1,
    ) -> None:
        faiss.omp_set_num_threads(threads)  # the CPUs the actor holds
        stored = index.open()
        if len(stored) != job.row_count:
            raise SemsearchError(
                f"the index in {index.folder} has {len(stored)} live rows on a worker, "
                f"{job.row_count} on the driver: run the mining again"
            )
        own = None
        if plan.kind == "own":
            own = stored.trained_index()[0]  # type: ignore[index]
        elif trained is not None:
            index_bytes = require_ray().get(trained[0])  # in a list: Ray Data passes it as is
            own = VectorIndex(faiss.deserialize_index(index_bytes), plan.metric)
        self.vectors = SearchedVectors(stored, job.rows)
        self.structure = build_structure(plan, self.vectors, own)
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
        return {
            "key": np.concatenate(keys),
            "score": np.concatenate(scores),
            "found": np.concatenate(found),
        }
