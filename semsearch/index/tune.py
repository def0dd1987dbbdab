"""Tuning an index's search parameter to a recall target, instead of guessing it.

Recall@k is measured against exact search: a sample of the corpus' own vectors serves as
queries (each query's own row is left out of both result lists, so that finding itself
does not count), or the user's queries encoded by the index's model. The smallest nprobe
(IVF) or efSearch (HNSW) whose recall meets the target is kept.

Where the index keeps exact vectors (IVF-Flat, HNSW-Flat) its scores are exact, and recall
is tie-aware: a result counts when it scores as well as the exact k-th neighbour. Real
corpora hold identical texts (95,268 of PyPI's 841,708 summaries), whose rows swap freely
at rank k; comparing row ids called those misses and asked for twice the nprobe needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import faiss
import numpy as np

from semsearch.errors import SemsearchError
from semsearch.index.factory import METRICS, apply_search_params, prepare_vectors

DEFAULT_TUNING_QUERIES = 1000
SCORE_TOLERANCE = 1e-5  # float32 scores of the same pair from two indexes differ by rounding
EF_SEARCH_CANDIDATES = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048)


@dataclass(frozen=True)
class TuningResult:
    """What tuning chose and why: the recall it measured at each value it tried."""

    parameter: str
    value: int
    recall: float
    target: float
    k: int
    queries: int
    met: bool
    tried: dict[int, float]

    def to_dict(self) -> dict:
        return asdict(self)


def tunable_parameter(index: faiss.Index) -> str | None:
    """`nprobe` for IVF indexes, `efSearch` for HNSW, None for exact ones."""
    if faiss.try_extract_index_ivf(index) is not None:
        return "nprobe"
    if hasattr(faiss.downcast_index(index), "hnsw"):
        return "efSearch"
    return None


def exact_search(
    queries: np.ndarray, chunks: Iterable[np.ndarray], k: int, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """Scores and row numbers of the exact top-k of each query over vectors streamed in chunks."""
    keep_max = METRICS[metric] == faiss.METRIC_INNER_PRODUCT
    heap = faiss.ResultHeap(len(queries), k, keep_max=keep_max)
    offset = 0
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        flat = faiss.IndexFlat(queries.shape[1], METRICS[metric])
        flat.add(prepare_vectors(chunk, metric))
        scores, rows = flat.search(queries, min(k, len(chunk)))
        rows = np.where(rows >= 0, rows + offset, -1)
        heap.add_result(np.ascontiguousarray(scores), np.ascontiguousarray(rows))
        offset += len(chunk)
    heap.finalize()
    return heap.D, heap.I


def tie_aware_recall(
    found_scores: np.ndarray,
    found: np.ndarray,
    kth_exact: np.ndarray,
    k: int,
    higher_is_better: bool,
) -> float:
    """Mean share of each query's top-k results that score as well as its exact k-th neighbour."""
    valid = found[:, :k] >= 0
    if higher_is_better:
        good = found_scores[:, :k] >= kth_exact[:, None] - SCORE_TOLERANCE
    else:
        good = found_scores[:, :k] <= kth_exact[:, None] + SCORE_TOLERANCE
    return float(np.sum(good & valid) / (k * len(found)))


def recall_at_k(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Mean share of each query's exact top-k that the index returned in its top-k."""
    hits = [len(set(f[:k]) & set(e[:k]) - {-1}) for f, e in zip(found, exact)]
    return float(np.sum(hits) / (k * len(exact)))


def tune_index(
    index: faiss.Index,
    queries: np.ndarray,
    exact: np.ndarray,
    target: float,
    k: int = 10,
    query_rows: np.ndarray | None = None,
    exact_scores: np.ndarray | None = None,
) -> TuningResult:
    """The smallest nprobe/efSearch whose recall@k on `queries` meets `target`.

    `exact` holds each query's exact neighbours (and `exact_scores` their scores, which make
    recall tie-aware where the index keeps exact vectors); with `query_rows` (the queries'
    own rows in the index) those rows are dropped from both sides, so the queries act as
    held-out ones.
    """
    if not 0 < target <= 1:
        raise SemsearchError(f"target recall must be in (0, 1], not {target}")
    parameter = tunable_parameter(index)
    if parameter is None:
        raise SemsearchError("this index searches exactly (recall 1.0): there is nothing to tune")
    if exact_scores is not None and not keeps_exact_vectors(index):
        exact_scores = None  # PQ scores are estimates: compare rows instead
    measure = _recall_measure(index, queries, exact, k, query_rows, parameter, exact_scores)
    candidates = _candidates(index, parameter, k)
    tried: dict[int, float] = {}
    for position, value in enumerate(candidates):
        tried[value] = measure(value)
        if tried[value] >= target:
            low = candidates[position - 1] if position else _below_smallest(parameter, k)
            value = _smallest_meeting(measure, low, value, target, tried)
            return TuningResult(
                parameter, value, tried[value], target, k, len(queries), True, tried
            )
    best = candidates[-1]
    return TuningResult(parameter, best, tried[best], target, k, len(queries), False, tried)


def _recall_measure(
    index: faiss.Index,
    queries: np.ndarray,
    exact: np.ndarray,
    k: int,
    query_rows: np.ndarray | None,
    parameter: str,
    exact_scores: np.ndarray | None,
) -> Callable[[int], float]:
    extra = 0 if query_rows is None else 1
    truth = _without_self(exact, query_rows, k)
    higher_is_better = index.metric_type == faiss.METRIC_INNER_PRODUCT
    kth_exact = None
    if exact_scores is not None:
        kth_exact = _scores_without_self(exact_scores, exact, query_rows, k)[:, k - 1]

    def measure(value: int) -> float:
        apply_search_params(index, {parameter: value})
        scores, found = index.search(queries, k + extra)
        if kth_exact is None:
            return recall_at_k(_without_self(found, query_rows, k), truth, k)
        return tie_aware_recall(_scores_without_self(scores, found, query_rows, k),
                                _without_self(found, query_rows, k), kth_exact, k,
                                higher_is_better)  # fmt: skip

    return measure


def _without_self(rows: np.ndarray, query_rows: np.ndarray | None, k: int) -> np.ndarray:
    if query_rows is None:
        return rows[:, :k]
    kept = [[row for row in line if row != own][:k] for line, own in zip(rows, query_rows)]
    return np.array([line + [-1] * (k - len(line)) for line in kept], dtype=np.int64)


def _scores_without_self(
    scores: np.ndarray, rows: np.ndarray, query_rows: np.ndarray | None, k: int
) -> np.ndarray:
    if query_rows is None:
        return scores[:, :k]
    kept = [[score for score, row in zip(line, line_rows) if row != own][:k]
            for line, line_rows, own in zip(scores, rows, query_rows)]  # fmt: skip
    return np.array([line + [np.nan] * (k - len(line)) for line in kept], dtype=np.float32)


def _candidates(index: faiss.Index, parameter: str, k: int) -> list[int]:
    if parameter == "nprobe":
        nlist = faiss.extract_index_ivf(index).nlist
        powers = [2**power for power in range(nlist.bit_length()) if 2**power < nlist]
        return [*powers, nlist]
    return [value for value in EF_SEARCH_CANDIDATES if value >= k] or [k]


def _below_smallest(parameter: str, k: int) -> int:
    """The value just under the smallest worth trying: FAISS's HNSW explores at least k
    candidates whatever efSearch says, so efSearch below k would only misreport the setting."""
    return k - 1 if parameter == "efSearch" else 0


def _smallest_meeting(
    measure: Callable[[int], float], low: int, high: int, target: float, tried: dict[int, float]
) -> int:
    """Binary search in (low, high] for the smallest value meeting `target` (recall rises with it)."""
    while high - low > 1:
        middle = (low + high) // 2
        tried[middle] = measure(middle)
        if tried[middle] >= target:
            high = middle
        else:
            low = middle
    return high


def keeps_exact_vectors(index: faiss.Index) -> bool:
    """True for flat storage (Flat, IVF-Flat, HNSW-Flat), False where it keeps codes (PQ)."""
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        return isinstance(faiss.downcast_index(ivf), faiss.IndexIVFFlat)
    downcast = faiss.downcast_index(index)
    storage = faiss.downcast_index(downcast.storage) if hasattr(downcast, "hnsw") else downcast
    return isinstance(storage, faiss.IndexFlat)


def stored_vectors(index: faiss.Index, chunk_rows: int = 65_536) -> Iterable[np.ndarray]:
    """The exact vectors an index holds, chunk by chunk; refused where it only keeps codes.

    The checks (and IVF's direct map, which `reconstruct` needs) happen on the call, before
    the first chunk is asked for.
    """
    if not keeps_exact_vectors(index):
        raise SemsearchError(_COMPRESSED)
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        ivf.make_direct_map()
    return (
        index.reconstruct_n(start, min(chunk_rows, index.ntotal - start))
        for start in range(0, index.ntotal, chunk_rows)
    )


_COMPRESSED = (
    "this index stores compressed codes, not the vectors that exact search needs: tune it "
    "while building, with 'semsearch build --target-recall'"
)
