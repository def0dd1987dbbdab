"""Every text's nearest neighbours inside its own collection, through FAISS, in chunks.

Up to AUTO_EXACT_LIMIT vectors the search is exact (Flat). Above it, it uses the trained
structure of the index the vectors came from, or an IVF index trained on the spot, so the
cost grows about linearly with the collection instead of quadratically. On a GPU device
the structure is filled and searched there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from tqdm.auto import tqdm

from semsearch.ann.base import AnnBackend
from semsearch.ann.devices import CPU, FaissDevice
from semsearch.ann.factory import AUTO_EXACT_LIMIT, IndexSpec, choose_index
from semsearch.ann.faiss_gpu import GPU_MAX_K
from semsearch.ann.vector_index import VectorIndex

log = logging.getLogger(__name__)
# Trained structures with inverted lists can be emptied and refilled with some of their rows.
REFILLABLE = ("IVF",)
# Rows added to a structure at a time: FAISS's own IVF add batch, so the lists are the same.
FILL_CHUNK = 65_536


@dataclass(frozen=True)
class Neighbours:
    """One chunk of queries (positions `start`…) and their neighbours' positions and scores."""

    start: int
    positions: np.ndarray
    scores: np.ndarray


class VectorSource(Protocol):
    """Search-ready vectors of the searched rows, read a few at a time: an array, or an
    index's stored vectors read where they lie (a mining worker never holds them all)."""

    def __len__(self) -> int: ...

    @property
    def dimension(self) -> int: ...

    def take(self, positions: np.ndarray | range) -> np.ndarray:
        """The vectors at `positions` (increasing) as a float32 array."""
        ...


class ArrayVectors:
    """A `VectorSource` over vectors already in memory (a range is a view, not a copy)."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors

    def __len__(self) -> int:
        return len(self.vectors)

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def take(self, positions: np.ndarray | range) -> np.ndarray:
        if isinstance(positions, range):
            return self.vectors[positions.start : positions.stop]
        return self.vectors[positions]


StructureKind = Literal["torch", "exact", "own", "train"]


@dataclass(frozen=True)
class StructurePlan:
    """Which structure to search, decided once from the row count and the index's trained
    structure, and built wherever the vectors are (this process, or every mining worker)."""

    kind: StructureKind  # torch: exact on a torch device; own: the index's trained IVF
    metric: str
    params: dict[str, int]
    about: str


def plan_structure(
    rows: int,
    dimension: int,
    metric: str,
    trained: tuple[VectorIndex, dict[str, int], str] | None = None,
    nprobe: int | None = None,
    device: FaissDevice = CPU,
) -> StructurePlan:
    """The structure `search_structure` builds over `rows` vectors; see its docstring."""
    if device.torch_device is not None:  # a GPU without GPU FAISS: exact, matrix products
        return StructurePlan("torch", metric, {}, f"exact, on {device}")
    where = f", on {device}" if device.is_gpu else ""
    if rows <= AUTO_EXACT_LIMIT:
        return StructurePlan("exact", metric, {}, f"Flat (exact{where})")
    if device.is_gpu and nprobe is not None and nprobe > GPU_MAX_K:
        log.warning(
            "GPU FAISS probes at most %d lists: --nprobe %d becomes %d",
            GPU_MAX_K,
            nprobe,
            GPU_MAX_K,
        )
        nprobe = GPU_MAX_K
    params = {"nprobe": nprobe} if nprobe is not None else {}
    if trained is not None and trained[2].startswith(REFILLABLE):
        _, own_params, factory = trained
        about = f"{factory} (the index's own centroids{where})"
        return StructurePlan("own", metric, {**own_params, **params}, about)
    spec = choose_index("ivf", rows, dimension, metric)
    about = f"{spec.factory} (trained for mining{where})"
    return StructurePlan("train", metric, {**spec.search_params, **params}, about)


def search_structure(
    vectors: np.ndarray | VectorSource,
    metric: str,
    trained: tuple[VectorIndex, dict[str, int], str] | None = None,
    nprobe: int | None = None,
    device: FaissDevice = CPU,
) -> tuple[SearchStructure, str]:
    """A structure over `vectors` (ids are their positions) to search them with, and a few
    words on what it is.

    Up to AUTO_EXACT_LIMIT rows it is exact; above, `trained` (the empty trained structure
    of the index the vectors came from, with its search parameters and factory string) is
    filled and used when it has inverted lists, else an IVF index is trained on the spot.
    """
    source = vectors if not isinstance(vectors, np.ndarray) else ArrayVectors(vectors)
    plan = plan_structure(len(source), source.dimension, metric, trained, nprobe, device)
    own = trained[0] if plan.kind == "own" and trained is not None else None
    structure = build_structure(plan, source, own, device)
    if plan.kind == "train" and device.is_gpu and not structure.index.device.is_gpu:
        return structure, plan.about.replace(f", on {device}", "")  # FAISS fell back to the CPU
    return structure, plan.about


def build_structure(
    plan: StructurePlan,
    source: VectorSource,
    trained: VectorIndex | None = None,
    device: FaissDevice = CPU,
) -> SearchStructure:
    """`plan`'s structure over `source`, filled a chunk at a time. `trained` is the index's
    own empty structure (kind `own`), or one trained already (kind `train`, e.g. by one
    worker for all): without it a `train` plan trains on the local miner's sample."""
    rows, dimension = len(source), source.dimension
    if plan.kind == "torch":
        from semsearch.ann.torch_exact import TorchExactIndex  # torch only where it runs

        exact = TorchExactIndex(plan.metric, dimension, device.torch_device)
        exact.add(source.take(range(rows)), np.arange(rows), prepared=True)
        return SearchStructure(exact, plan.params)
    if plan.kind == "exact":
        index = VectorIndex.create(IndexSpec("flat", "Flat", plan.metric), dimension)
    elif trained is not None:
        index = trained
    else:
        index = train_structure(source, plan.metric, device)
    index.move_to(device)
    for start in range(0, rows, FILL_CHUNK):
        stop = min(start + FILL_CHUNK, rows)
        index.add(source.take(range(start, stop)), np.arange(start, stop), prepared=True)
    return SearchStructure(index, plan.params)


def train_structure(source: VectorSource, metric: str, device: FaissDevice = CPU) -> VectorIndex:
    """An empty IVF index trained on a sample of `source` (seed 0: the same on every machine)."""
    spec = choose_index("ivf", len(source), source.dimension, metric)
    index = VectorIndex.create(spec, source.dimension)
    index.move_to(device)
    sample = np.random.default_rng(0).choice(
        len(source), size=index.training_rows(len(source)), replace=False
    )
    index.train(source.take(np.sort(sample)))
    return index


@dataclass(frozen=True)
class SearchStructure:
    """An index and the search parameters every call uses."""

    index: AnnBackend
    params: dict[str, int]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(queries, k, self.params)


def search_in_chunks(
    index: SearchStructure,
    vectors: np.ndarray | VectorSource,
    k: int,
    chunk: int,
    show_progress: bool = False,
    queries: range | None = None,
) -> Iterator[Neighbours]:
    """The `k` nearest other rows of every row (of the rows in `queries`, default all),
    `chunk` query rows at a time, the chunks starting at multiples of `chunk`."""
    source = vectors if not isinstance(vectors, np.ndarray) else ArrayVectors(vectors)
    k = min(k, len(source) - 1)
    queries = queries if queries is not None else range(len(source))
    with tqdm(total=len(queries), desc="searching", unit="text", disable=not show_progress) as bar:
        for start in range(queries.start, queries.stop, chunk):
            query_vectors = source.take(range(start, min(start + chunk, queries.stop)))
            # One extra neighbour: each row normally finds itself first.
            scores, positions = index.search(query_vectors, k + 1)
            yield Neighbours(start, _without_self(positions, start, k), scores)
            bar.update(len(query_vectors))


def _without_self(positions: np.ndarray, start: int, k: int) -> np.ndarray:
    """`positions` with the query itself, missing results and any (k+1)-th neighbour set to -1."""
    own = np.arange(start, start + len(positions))[:, None]
    valid = (positions >= 0) & (positions != own)
    valid &= np.cumsum(valid, axis=1) <= k
    return np.where(valid, positions, -1)
