"""The package's one exact k-nearest-neighbour search, the same code on a CPU and a GPU.

A base is placed on the device once (`ExactSearch`) and searched in tiles sized from the
device's free memory; out of memory, the tiles halve (one warning), and where one row does
not fit the search goes on on the CPU: it never fails. Scores are on FAISS's scale (inner
products, squared L2 or L1 distances); among equal scores the lower position wins, so
results are the same whatever the tiling.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import faiss
import numpy as np
import torch

from semsearch.ann import devices
from semsearch.ann.metrics import INNER_PRODUCT, higher_is_better, prepare_vectors
from semsearch.errors import SemsearchError

log = logging.getLogger(__name__)

# Bytes per score entry a tile costs: scores, the boundary-tie mask, and for L2 a temporary.
BYTES_PER_SCORE = {"cosine": 12, "dot": 12, "l2": 16, "manhattan": 16}
QUERY_TILE = 4096  # most query rows per tile; base rows fill the rest of the budget


def nearness(queries: torch.Tensor, base: torch.Tensor, metric: str) -> torch.Tensor:
    """[queries, base] scores where higher is nearer: inner products or negated distances."""
    if metric in INNER_PRODUCT:
        return queries @ base.T
    if metric == "manhattan":
        return -torch.cdist(queries, base, p=1)
    squared = (queries * queries).sum(1, keepdim=True) - 2 * queries @ base.T
    return -(squared + (base * base).sum(1)[None, :]).clamp_(min=0)


@dataclass(frozen=True)
class Tiles:
    """Rows of queries and of base one score tile covers."""

    queries: int
    base: int

    @classmethod
    def fitting(cls, budget: int, queries: int, base: int, metric: str) -> Tiles:
        entries = max(1, budget // BYTES_PER_SCORE[metric])
        query_rows = max(1, min(queries, QUERY_TILE, entries))
        return cls(query_rows, max(1, min(base, entries // query_rows)))

    def halved(self) -> Tiles | None:
        """Half the area (the longer side halved); None once a tile is one row by one row."""
        if self.queries == 1 and self.base == 1:
            return None
        if self.base >= self.queries:
            return Tiles(self.queries, max(1, self.base // 2))
        return Tiles(max(1, self.queries // 2), self.base)


class ExactSearch:
    """Exact top-k over one base of prepared vectors, held on `device` once.

    A base larger than the device's free memory stays on the host and visits the device a
    tile at a time. `search` takes numpy or torch queries; `search_tensors` keeps its
    results on the device (for k-means, which calls it every iteration).
    """

    def __init__(
        self, base: np.ndarray | torch.Tensor, metric: str, device: str | torch.device = "cpu"
    ) -> None:
        self.metric = metric
        self.device = torch.device(device)
        self.tiles: Tiles | None = None  # the tiles known to fit, once something did not
        with warnings.catch_warnings():  # a read-only (memory-mapped) base is only read
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            self.base = self._placed(torch.as_tensor(base))

    def __len__(self) -> int:
        return len(self.base)

    def _placed(self, base: torch.Tensor) -> torch.Tensor:
        if self.device.type != "cuda" or base.device == self.device:
            return base.to(self.device)
        if (
            base.numel() * base.element_size()
            > devices.free_bytes(self.device) * devices.GPU_FREE_SHARE
        ):
            log.info(
                "an exact search's base (%d rows) stays on the host: it visits %s a tile at a time",
                len(base),
                self.device,
            )
            return base
        try:
            return base.to(self.device)
        except devices.torch_out_of_memory():
            devices.release_torch_cache()
            return base

    def search(self, queries: np.ndarray | torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores (FAISS's scale) and positions of each query's `k` nearest base rows, best
        first; at most len(base) columns."""
        scores, positions = self.search_tensors(torch.as_tensor(queries), k)
        return scores.cpu().numpy().astype(np.float32, copy=False), positions.cpu().numpy()

    def search_tensors(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`search` with torch results on the device the search ran on."""
        k = min(k, len(self.base))
        if k <= 0 or len(queries) == 0:
            empty = torch.empty((len(queries), max(k, 0)), device=self.device)
            return empty, empty.long()
        tiles = self.tiles or Tiles.fitting(
            devices.tile_bytes(self.device), len(queries), len(self.base), self.metric
        )
        scores, positions, start = [], [], 0
        while start < len(queries):
            try:
                best, where = self._query_tile(queries[start : start + tiles.queries], k, tiles)
            except devices.torch_out_of_memory():
                tiles = self._after_out_of_memory(tiles)
                continue
            scores.append(best if higher_is_better(self.metric) else -best)
            positions.append(where)
            start += tiles.queries
        return torch.cat(scores), torch.cat(positions)

    def _after_out_of_memory(self, tiles: Tiles) -> Tiles:
        """Smaller tiles after an out-of-memory, or the CPU once a single row does not fit."""
        devices.release_torch_cache()
        smaller = tiles.halved()
        if smaller is None and self.device.type == "cpu":
            raise SemsearchError("out of memory for one row of an exact search: free some memory")
        if smaller is None:
            log.warning(
                "%s has no memory for one row of an exact search: going on on the CPU", self.device
            )
            self.device, self.base = torch.device("cpu"), self.base.cpu()
            smaller = Tiles.fitting(
                devices.CPU_TILE_BYTES, tiles.queries, len(self.base), self.metric
            )
        elif self.tiles is None:
            log.warning(
                "%s ran out of memory in an exact search: tiles of %d x %d rows from now on",
                self.device,
                smaller.queries,
                smaller.base,
            )
        self.tiles = smaller
        return smaller

    def _query_tile(
        self, queries: torch.Tensor, k: int, tiles: Tiles
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Nearness and positions of the top-k of a few queries over the whole base."""
        queries = queries.to(self.device, non_blocking=True)
        best = where = None
        for low in range(0, len(self.base), tiles.base):
            block = self.base[low : low + tiles.base].to(self.device, non_blocking=True)
            tile_best, tile_where = top_k(nearness(queries, block, self.metric), k)
            tile_where += low
            if best is None:
                best, where = tile_best, tile_where
            else:  # earlier tiles hold lower positions: a stable sort keeps them first in ties
                best, order = torch.cat([best, tile_best], 1).sort(
                    dim=1, descending=True, stable=True
                )
                where = torch.cat([where, tile_where], 1).gather(1, order)
                best, where = best[:, :k], where[:, :k]
        return best, where


def top_k(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `k` highest scores of each row and their columns, best first, the lower column
    first among equal scores (also at the k-th place, which `topk` alone leaves open)."""
    k = min(k, scores.shape[1])
    best, where = scores.topk(k, dim=1)
    order = where.argsort(dim=1)
    best, where = best.gather(1, order), where.gather(1, order)
    order = best.argsort(dim=1, descending=True, stable=True)
    best, where = best.gather(1, order), where.gather(1, order)
    tied = (scores >= best[:, -1:]).sum(1) > k  # more rows score as well as the k-th
    if tied.any():
        all_best, all_where = scores[tied].sort(dim=1, descending=True, stable=True)
        best[tied], where[tied] = all_best[:, :k], all_where[:, :k]
    return best, where


def exact_knn(
    queries: np.ndarray,
    parts: Iterable[tuple[np.ndarray, np.ndarray]],
    k: int,
    metric: str,
    device: str | torch.device = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Scores and ids of the exact top-k of each query over (ids, vectors) parts streamed
    in turn (-1 where fewer rows exist); memory stays bounded by one part.

    `queries` must be prepared (`prepare_vectors`); parts are prepared here.
    """
    heap = faiss.ResultHeap(len(queries), k, keep_max=higher_is_better(metric))
    on_device = torch.as_tensor(queries).to(device)
    for ids, vectors in parts:
        if len(vectors) == 0:
            continue
        search = ExactSearch(prepare_vectors(vectors, metric), metric, device)
        scores, positions = search.search(on_device, k)
        device = search.device  # the CPU, if the device ran out of memory for good
        found = np.asarray(ids, dtype=np.int64)[positions]
        heap.add_result(np.ascontiguousarray(scores), np.ascontiguousarray(found))
    heap.finalize()
    return heap.D, heap.I
