"""Tuning an index's search parameter to a recall target, instead of guessing it.

Recall@k is measured against exact search, on the user's queries or a sample of the
corpus' own rows (each left out of its own results; a segment keeps them out of its
structure too: `semsearch.store.held_out`); the smallest nprobe (IVF) or
efSearch (HNSW) that meets the target is kept. Recall is tie-aware: a result counts when it
scores as well as the exact k-th neighbour, since identical texts (95,268 of PyPI's 841,708
summaries) swap freely at rank k. A coded index's (SQ, PQ) scores are estimates, so its
answers are scored again from the stored vectors (`StoredScores`) first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from semsearch.ann.base import RereadableParts
from semsearch.ann.metrics import higher_is_better
from semsearch.ann.vector_index import VectorIndex, prepare_vectors
from semsearch.errors import SemsearchError

log = logging.getLogger(__name__)

SCORE_TOLERANCE = 1e-5  # float32 scores of the same pair from two indexes differ by rounding
# Recall gained over the last two doublings below which, when asked, tuning stops climbing:
# a rescoring index's recall is capped by how many candidates its codes rank (oversample),
# and probing more lists past that point only costs time (at 20M rows, minutes a step).
PLATEAU_GAIN = 0.002
TUNING_K = 10  # the recall@k a build, reindex and tune measure
Rescore = Callable[[np.ndarray, np.ndarray], np.ndarray]


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
    # Other parameters chosen with it (a `disk` index's oversample), kept with it.
    also: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def search_params(self) -> dict[str, int]:
        """What the manifest records: the tuned parameter and those chosen with it."""
        return {self.parameter: self.value, **self.also}


def shortfall(result: TuningResult, index: VectorIndex) -> str:
    """One line for a missed target: the recall reached, and what would reach more."""
    largest = max(result.tried, default=result.value)
    line = (
        f"recall target missed: the best {result.parameter} ({result.value}) reaches "
        f"recall@{result.k} {result.recall:.3f}, under the target {result.target}; "
    )
    if result.parameter == "nprobe":
        ceiling = index.parameter_ceiling()
        if ceiling is not None and largest < ceiling:
            return line + (
                f"up to {largest} of {ceiling} lists were tried (a GPU's limit): try a "
                "larger --nprobe at query time on a CPU, or another --index-type"
            )
        codes = "" if index.keeps_exact_vectors() else ": its compressed codes cap the recall"
        return line + (
            f"even every list (nprobe {largest}) falls short{codes}; rebuild with "
            "another --index-type (ivfsq or ivf keep more of each vector, hnsw or "
            "flat search better) or lower --target-recall"
        )
    return line + (
        f"up to efSearch {largest} was tried: give a larger --ef-search at query "
        "time, or rebuild with another --index-type (HNSW64 links more, flat is "
        "exact) or lower --target-recall"
    )


def enforce_target(result: TuningResult, index: VectorIndex, strict: bool = False) -> None:
    """Say when tuning missed its target (a warning), or refuse it with `strict`: a recall
    far under what was asked must not pass as if it were met."""
    if result.met:
        return
    message = shortfall(result, index)
    if strict:
        raise SemsearchError(f"{message} (--strict: nothing was written)")
    log.warning("%s", message)


def log_tuned(result: TuningResult) -> None:
    """The line a build says about its tuning: the value chosen, the recall it reached."""
    verdict = "meets" if result.met else "does NOT meet (the best found)"
    log.warning(
        "tuned %s=%d: recall@%d %.3f on %d queries %s the target %s",
        result.parameter,
        result.value,
        result.k,
        result.recall,
        result.queries,
        verdict,
        result.target,
    )


def tie_aware_recall(
    found_scores: np.ndarray,
    found: np.ndarray,
    kth_exact: np.ndarray,
    k: int,
    higher_is_better: bool,
    tolerance: float = SCORE_TOLERANCE,
) -> float:
    """Mean share of each query's top-k results that score as well as its exact k-th neighbour."""
    valid = found[:, :k] >= 0
    if higher_is_better:
        good = found_scores[:, :k] >= kth_exact[:, None] - tolerance
    else:
        good = found_scores[:, :k] <= kth_exact[:, None] + tolerance
    return float(np.sum(good & valid) / (k * len(found)))


def rescored_recall(
    found: np.ndarray,
    queries: np.ndarray,
    vectors: np.ndarray,
    kth_exact: np.ndarray,
    metric: str,
    tolerance: float = SCORE_TOLERANCE,
) -> float:
    """Tie-aware recall@k of `found` rows ([queries, k], -1 for none) with their true scores
    recomputed from `vectors`: an index's own scores may be estimates (PQ, fp16 codes), and
    rows that tie with the exact k-th neighbour (identical texts) are no loss. `kth_exact`
    holds each query's exact k-th score in the metric's own units (squared L2 for "l2")."""
    scores = pair_scores(queries, vectors[np.maximum(found, 0)], metric)
    return tie_aware_recall(
        scores, found, kth_exact, found.shape[1], higher_is_better(metric), tolerance
    )


def pair_scores(queries: np.ndarray, rows: np.ndarray, metric: str) -> np.ndarray:
    """[queries, k] exact scores of each query with its `rows` ([queries, k, d]), on FAISS's
    scale (L2 scores are squared distances)."""
    if higher_is_better(metric):
        return np.einsum("qd,qkd->qk", queries, rows)
    if metric == "manhattan":
        return np.abs(rows - queries[:, None, :]).sum(axis=2)
    return np.square(rows - queries[:, None, :]).sum(axis=2)


def recall_at_k(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Mean share of each query's exact top-k that the index returned in its top-k."""
    hits = [len(set(f[:k]) & set(e[:k]) - {-1}) for f, e in zip(found, exact)]
    return float(np.sum(hits) / (k * len(exact)))


def tune_index(
    index: VectorIndex,
    queries: np.ndarray,
    exact: np.ndarray,
    target: float,
    k: int = TUNING_K,
    query_ids: np.ndarray | None = None,
    exact_scores: np.ndarray | None = None,
    rescore: Rescore | None = None,
    ceiling: int | None = None,
    stop_on_plateau: bool = False,
) -> TuningResult:
    """The smallest nprobe/efSearch whose recall@k on `queries` meets `target`.

    `exact` holds each query's exact neighbours' ids; `exact_scores` make recall tie-aware
    (with `rescore` for a coded index); `query_ids`, the queries' own rows, are left out of
    both sides. The index is never changed (per-call parameters). `ceiling` bounds the values
    tried; `stop_on_plateau` stops once two doublings gained less than PLATEAU_GAIN.
    """
    if not 0 < target <= 1:
        raise SemsearchError(f"target recall must be in (0, 1], not {target}")
    parameter = index.tunable_parameter()
    if parameter is None:
        raise SemsearchError("this index searches exactly (recall 1.0): there is nothing to tune")
    k = _reachable_k(exact, query_ids, k)
    if exact_scores is not None and rescore is None and not index.keeps_exact_vectors():
        exact_scores = None  # PQ/SQ scores are estimates: without the vectors, compare ids
    if index.keeps_exact_vectors():
        rescore = None  # its own scores are exact already
    measure = _recall_measure(index, queries, exact, k, query_ids, parameter, exact_scores, rescore)
    candidates = [
        value for value in index.parameter_candidates(k) if ceiling is None or value <= ceiling
    ]
    tried: dict[int, float] = {}
    for position, value in enumerate(candidates):
        tried[value] = measure(value)
        if tried[value] >= target:
            low = candidates[position - 1] if position else _below_smallest(parameter, k)
            value = _smallest_meeting(measure, low, value, target, tried)
            return TuningResult(
                parameter, value, tried[value], target, k, len(queries), True, tried
            )
        if stop_on_plateau and _has_plateaued([tried[done] for done in candidates[: position + 1]]):
            log.info(
                "%s: recall %.4f stopped rising at %d, not climbing further",
                parameter,
                tried[value],
                value,
            )
            break
    # Recall need not rise with the parameter (PQ codes rank by estimates): keep the best
    # measured, the cheapest among equals.
    best = min(tried, key=lambda value: (-tried[value], value))
    return TuningResult(parameter, best, tried[best], target, k, len(queries), False, tried)


def _has_plateaued(recalls: list[float]) -> bool:
    """Whether the last two steps together gained less than PLATEAU_GAIN."""
    return len(recalls) >= 3 and recalls[-1] - recalls[-3] < PLATEAU_GAIN


def _reachable_k(exact: np.ndarray, query_ids: np.ndarray | None, k: int) -> int:
    """k, or fewer where the index holds fewer other rows than k: with 4 rows a query has at
    most 3 neighbours besides itself, and recall@10 would never pass 0.3 whatever the setting."""
    own = 0 if query_ids is None else 1
    reachable = int(np.min(np.sum(exact >= 0, axis=1))) - own if len(exact) else 0
    if reachable < 1:
        raise SemsearchError(
            "too few rows to measure recall (a sampled row is left out of its own results): "
            "tune an index of at least 2 rows, or give queries"
        )
    return min(k, reachable)


def _recall_measure(
    index: VectorIndex,
    queries: np.ndarray,
    exact: np.ndarray,
    k: int,
    query_ids: np.ndarray | None,
    parameter: str,
    exact_scores: np.ndarray | None,
    rescore: Rescore | None = None,
) -> Callable[[int], float]:
    extra = 0 if query_ids is None else 1
    truth = _without_self(exact, exact, query_ids, k)
    better_high = higher_is_better(index.metric)
    kth_exact = None
    if exact_scores is not None:
        kth_exact = _without_self(exact_scores, exact, query_ids, k)[:, k - 1]

    def measure(value: int) -> float:
        scores, found = index.search(queries, k + extra, {parameter: value})
        if rescore is not None:
            scores = rescore(queries, found)
        if kth_exact is None:
            return recall_at_k(_without_self(found, found, query_ids, k), truth, k)
        return tie_aware_recall(
            _without_self(scores, found, query_ids, k),
            _without_self(found, found, query_ids, k),
            kth_exact,
            k,
            better_high,
        )

    return measure


def _without_self(
    values: np.ndarray, rows: np.ndarray, query_ids: np.ndarray | None, k: int
) -> np.ndarray:
    """Each line's first `k` `values` (ids or scores) whose row is not the query's own,
    padded with -1 (ids) or NaN (scores)."""
    if query_ids is None:
        return values[:, :k]
    fill = np.nan if values.dtype.kind == "f" else -1
    kept = [
        [value for value, row in zip(line, line_rows) if row != own][:k]
        for line, line_rows, own in zip(values, rows, query_ids)
    ]
    return np.array([line + [fill] * (k - len(line)) for line in kept], dtype=values.dtype)


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


def tune_against_exact(
    index: VectorIndex,
    queries: np.ndarray,
    parts: RereadableParts,
    target: float,
    k: int = 10,
    query_ids: np.ndarray | None = None,
) -> TuningResult:
    """Tune `index` on `queries` (prepared) against exact search over the (ids, vectors)
    that `parts()` yields.

    With `query_ids` the queries are stored rows, each left out of its own results. The
    exact search runs where the index is (a GPU or the CPU).
    """
    extra = 0 if query_ids is None else 1
    scores, exact = index.knn(queries, parts(), k + extra)  # on the index's device
    rescore = None if index.keeps_exact_vectors() else StoredScores(parts, index.metric)
    return tune_index(
        index, queries, exact, target, k, query_ids, exact_scores=scores, rescore=rescore
    )


class StoredScores:
    """Exact scores of stored rows found by id: what a coded index (SQ, PQ) answered,
    scored as exact search scores it, so that tie-aware recall can judge it."""

    def __init__(self, parts: RereadableParts, metric: str) -> None:
        self.parts, self.metric = parts, metric
        ids = [np.asarray(part_ids, dtype=np.int64) for part_ids, _ in parts()]
        self._part_starts = np.cumsum([0, *(len(part_ids) for part_ids in ids)])
        every_id = np.concatenate(ids) if ids else np.empty(0, np.int64)
        self._order = np.argsort(every_id, kind="stable")
        self._sorted_ids = every_id[self._order]

    def __call__(self, queries: np.ndarray, found: np.ndarray) -> np.ndarray:
        """Scores [queries, results] of `found` ids (NaN where an id is -1)."""
        wanted = np.unique(found[found >= 0])
        at = np.minimum(
            np.searchsorted(self._sorted_ids, wanted), max(len(self._sorted_ids) - 1, 0)
        )
        if len(wanted) and not np.array_equal(self._sorted_ids[at], wanted):
            raise SemsearchError("the index returned ids that are not stored: rebuild the index")
        vectors = self._vectors_at(self._order[at])
        candidates = vectors[np.searchsorted(wanted, np.maximum(found, 0))] if len(wanted) else None
        if candidates is None:
            return np.full(found.shape, np.nan, dtype=np.float32)
        scores = pair_scores(queries, candidates, self.metric)
        return np.where(found >= 0, scores, np.nan).astype(np.float32)

    def _vectors_at(self, positions: np.ndarray) -> np.ndarray:
        """Prepared float32 vectors at global `positions` (in any order)."""
        order = np.argsort(positions)
        ascending = positions[order]
        chunks = []
        for part, (_, vectors) in enumerate(self.parts()):
            low, high = self._part_starts[part], self._part_starts[part + 1]
            inside = ascending[(ascending >= low) & (ascending < high)]
            if len(inside):
                chunks.append(np.asarray(vectors[inside - low], dtype=np.float32))
        gathered = np.concatenate(chunks) if chunks else np.empty((0, 0), np.float32)
        result = np.empty_like(gathered)
        result[order] = gathered
        return prepare_vectors(result, self.metric)
