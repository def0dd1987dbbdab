"""The live recall monitor: a sample of the served queries searched exactly, in spare time.

`semsearch serve` hands each answered dense query to `RecallMonitor.offer`, which keeps a
share of them (`--recall-sample`) with the generation that answered them. One low-priority
thread measures them while no search is in flight, within a CPU budget (`--recall-cpu`, a
share of one core, measured with `time.thread_time` and kept by sleeping), and keeps each
index's rolling recall@10 with a 95 % Wilson interval: `/metrics` and `GET /indexes/NAME`
report it, and a warning is logged when the interval lies wholly below the target.

How one query is measured (`sampled_recall`): the approximate top-10 is searched again on
the same generation, with the query's parameters and filter, at the vector level (before
one-hit-per-document grouping and hybrid fusion); the rows the filter allowed are scored
exactly, and the i-th returned row (from 0) is in the true top-10 when i plus the number of
rows it missed that score better than it is under 10 (ties count as found): recall is the
share of returned rows that are. Where more rows are allowed than `max_exact_rows`, a
systematic sample of them (every s-th row from a random start, so each row is kept with
probability 1/s) is scored instead, and each count of missed rows estimated as s times the
count in the sample: one implementation, exact when s is 1 (the estimate's error is measured
in tests/server/test_recall_monitor.py and given in docs/serving.md).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from semsearch.ann.metrics import higher_is_better, prepare_vectors
from semsearch.errors import SemsearchError
from semsearch.options import DEFAULT_TARGET_RECALL
from semsearch.search.snapshot import IndexSnapshot

if TYPE_CHECKING:
    from semsearch.server.metrics import ServerMetrics

log = logging.getLogger(__name__)

K = 10
SCORE_TOLERANCE = 1e-5  # scores this close to the approximate k-th count as ties (found)
MIN_QUERIES_TO_WARN = 20  # fewer sampled queries than this never warn: too little evidence
ROWS_PER_STEP = 8192  # rows scored between two looks at the budget and at requests in flight
Z_95 = 1.959964


@dataclass(frozen=True)
class MonitorSettings:
    """How the monitor samples and what it may spend.

    Args:
        sample_rate: the share of dense queries measured (0 turns the monitor off).
        cpu_share: the most of one core the monitor's thread may use, over time.
        target: the recall@10 below which it warns; None: each index's tuning target.
        window: how many of the latest sampled queries the rolling recall covers.
        max_exact_rows: above this many allowed rows, a sample of them is scored instead.
        queue_size: samples waiting to be measured; more are dropped (and counted).
        seed: seeds which queries are sampled and where a row sample starts (None: the
            system's randomness); a test that compares estimates sets it.
    """

    sample_rate: float = 0.01
    cpu_share: float = 0.05
    target: float | None = None
    window: int = 1000
    max_exact_rows: int = 1_000_000
    queue_size: int = 64
    seed: int | None = None

    def check(self) -> None:
        """Refuse values that mean nothing, in one line each."""
        if not 0 <= self.sample_rate <= 1:
            raise SemsearchError(
                f"--recall-sample must be a share in [0, 1] (0.01 is 1 %), not {self.sample_rate}"
            )
        if not 0 < self.cpu_share <= 1:
            raise SemsearchError(
                f"--recall-cpu must be a share of one core in (0, 1] (0.05 is 5 %), "
                f"not {self.cpu_share}"
            )
        if self.target is not None and not 0 <= self.target <= 1:
            raise SemsearchError(f"--recall-target must be in [0, 1], not {self.target}")


@dataclass
class Sample:
    """One sampled query: the generation that answered it, its vector, filter and parameters."""

    index: str
    snapshot: IndexSnapshot
    vector: np.ndarray
    where: str | None
    params: dict[str, int]


class _Stopped(Exception):
    """The monitor was stopped in the middle of a measurement."""


def wilson_interval(recall: float, queries: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a mean recall over `queries` sampled queries, each query
    counted once (its ten neighbours are not independent draws)."""
    if queries == 0:
        return 0.0, 1.0
    denominator = 1 + z * z / queries
    centre = (recall + z * z / (2 * queries)) / denominator
    half = z * math.sqrt(recall * (1 - recall) / queries + z * z / (4 * queries**2)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def sampled_recall(
    found: tuple[np.ndarray, np.ndarray],
    exact: tuple[np.ndarray, np.ndarray],
    kept_share: float,
    allowed_rows: int,
    higher: bool,
    k: int = K,
) -> float | None:
    """One query's recall@k from its approximate (scores, rows), best first, and the exact
    top rows of the allowed rows scored (a share `kept_share` of them; see the module
    docstring). None where no row is allowed."""
    wanted = min(k, allowed_rows)
    if wanted == 0:
        return None
    found_scores, found_rows = found
    returned = found_rows >= 0
    exact_scores, exact_rows = exact
    missed = exact_scores[(exact_rows >= 0) & ~np.isin(exact_rows, found_rows[returned])]
    good = 0
    for place, score in enumerate(found_scores[returned][:wanted].tolist()):
        if higher:
            better = np.count_nonzero(missed > score + SCORE_TOLERANCE)
        else:
            better = np.count_nonzero(missed < score - SCORE_TOLERANCE)
        good += place + better / kept_share < wanted  # fewer than k rows rank above it
    return float(good / wanted)


class IndexRecall:
    """One index's rolling recall: the latest sampled queries' recalls and what was said."""

    def __init__(self, window: int) -> None:
        self.recalls: deque[float] = deque(maxlen=window)
        self.estimated = 0  # queries measured on a sample of the rows, since start
        self.dropped = 0
        self.below = False  # the interval lies wholly under the target (enough queries)
        self.warned = False

    @property
    def recall(self) -> float | None:
        return sum(self.recalls) / len(self.recalls) if self.recalls else None

    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.recall or 0.0, len(self.recalls))


class RecallMonitor:
    """Samples served queries and measures their recall in spare time; see the module
    docstring. `start()` once serving, `stop()` at shutdown (the lifespan's)."""

    def __init__(self, settings: MonitorSettings, metrics: ServerMetrics | None = None) -> None:
        settings.check()
        self.settings = settings
        self.metrics = metrics
        self.indexes: dict[str, IndexRecall] = {}
        self.targets: dict[str, float] = {}
        self.cpu_seconds = 0.0
        self._queue: queue.Queue[Sample] = queue.Queue(settings.queue_size)
        self._in_flight = 0
        self._idle = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._random = random.Random(settings.seed)
        self._mark = 0.0  # the measuring thread's CPU time at its last checkpoint

    @property
    def enabled(self) -> bool:
        return self.settings.sample_rate > 0

    def start(self) -> None:
        """Start the measuring thread (nothing when sampling is off)."""
        if not self.enabled or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="semsearch-recall", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread: a measurement in progress is abandoned at its next step."""
        self._stop.set()
        with self._idle:
            self._idle.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Mark a search in flight: the monitor measures nothing until none is."""
        with self._idle:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._idle:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._idle.notify_all()

    def offer(
        self,
        index: str,
        snapshot: IndexSnapshot,
        vectors: np.ndarray,
        where: str | None,
        params: dict[str, int],
    ) -> None:
        """Keep each of `vectors` (queries `snapshot` answered) with the sampling rate's chance;
        a full queue drops it (counted). Cheap: called on the request's own thread."""
        if not self.enabled:
            return
        for vector in vectors:
            if self._random.random() >= self.settings.sample_rate:
                continue
            sample = Sample(index, snapshot, np.array(vector, np.float32)[None], where, params)
            try:
                self._queue.put_nowait(sample)
            except queue.Full:
                self._recall_of(index).dropped += 1
                if self.metrics is not None:
                    self.metrics.recall_samples.labels(index, "dropped").inc()

    def report(self, index: str) -> dict | None:
        """What `GET /indexes/NAME` says of `index`'s recall (None when the monitor is off)."""
        if not self.enabled:
            return None
        kept = self._recall_of(index)
        recall, (low, high) = kept.recall, kept.interval()
        target = self.targets.get(index)
        return {
            "recall_at_10": None if recall is None else round(recall, 4),
            "queries": len(kept.recalls),
            "interval_95": [round(low, 4), round(high, 4)] if kept.recalls else None,
            "target": target,
            "below_target": kept.below,
            "estimated_from_row_sample": kept.estimated,
            "dropped": kept.dropped,
            "sample_rate": self.settings.sample_rate,
        }

    def _recall_of(self, index: str) -> IndexRecall:
        with self._lock:
            return self.indexes.setdefault(index, IndexRecall(self.settings.window))

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # Linux: nice is per thread
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        self._mark = time.thread_time()
        while not self._stop.is_set():
            try:
                sample = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.measure(sample)
            except _Stopped:
                return
            except Exception:  # a damaged or replaced generation: that sample only
                log.debug("recall monitor: a sample of %s failed", sample.index, exc_info=True)
            finally:
                del sample  # the generation it held may now be released

    def measure(self, sample: Sample) -> float | None:
        """One sample's recall (None: no row allowed), added to its index's window; paced
        step by step on the calling thread (the monitor's own, or a test's)."""
        snapshot = sample.snapshot
        metric = snapshot.manifest.index.metric
        self._checkpoint()
        vector = prepare_vectors(sample.vector, metric)
        found = snapshot.search(vector, K, sample.params, sample.where)
        self._checkpoint()
        allowed = snapshot.where_mask(sample.where) if sample.where else snapshot.live
        allowed_rows = int(allowed.sum())
        stride = max(1, math.ceil(allowed_rows / self.settings.max_exact_rows))
        if stride > 1:  # every stride-th row from a random start: each kept with p = 1/stride
            kept = np.zeros_like(allowed)
            start = self._random.randrange(stride)
            kept[start::stride] = allowed[start::stride]
            allowed = kept
        exact = self._exact(snapshot, vector, allowed, metric)
        recall = sampled_recall(
            (found[0][0], found[1][0]),
            (exact[0][0], exact[1][0]),
            1 / stride,
            allowed_rows,
            higher_is_better(metric),
        )
        if recall is not None:
            self._record(sample.index, snapshot, recall, estimated=stride > 1)
        self._checkpoint()
        return recall

    def _exact(self, snapshot: IndexSnapshot, vector: np.ndarray, allowed: np.ndarray, metric):
        """The exact top 2k of the allowed rows (the misses counted are at most k), read and
        scored ROWS_PER_STEP rows at a time, with a checkpoint between two."""
        from semsearch.ann.exact import exact_knn

        _single_threaded_torch()

        def paced() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            for part in snapshot.allowed_parts(allowed, ROWS_PER_STEP):
                yield part
                self._checkpoint()  # after exact_knn scored it

        return exact_knn(vector, paced(), 2 * K, metric)

    def _checkpoint(self) -> None:
        """Account the thread's CPU time since the last checkpoint, sleep long enough to keep
        its share of a core, then wait until no search is in flight."""
        now = time.thread_time()
        spent, self._mark = now - self._mark, now
        self.cpu_seconds += spent
        if self.metrics is not None:
            self.metrics.recall_cpu.inc(spent)
        if self._stop.wait(spent * (1 / self.settings.cpu_share - 1)):
            raise _Stopped
        with self._idle:
            while self._in_flight and not self._stop.is_set():
                self._idle.wait(0.05)
        if self._stop.is_set():
            raise _Stopped

    def _record(self, index: str, snapshot: IndexSnapshot, recall: float, estimated: bool) -> None:
        kept = self._recall_of(index)
        target = self.settings.target
        if target is None:
            target = (snapshot.manifest.tuning or {}).get("target", DEFAULT_TARGET_RECALL)
        self.targets[index] = target
        kept.recalls.append(recall)
        kept.estimated += estimated
        mean, (low, high) = kept.recall, kept.interval()
        if self.metrics is not None:
            self.metrics.observe_recall(index, mean, len(kept.recalls), low, high, target)
        kept.below = bool(len(kept.recalls) >= MIN_QUERIES_TO_WARN and high < target)
        if kept.below and not kept.warned:
            kept.warned = True
            log.warning(
                "index %s: recall@10 of served queries is %.3f (95 %% interval %.3f-%.3f, "
                "%d queries), below its target %.2f: retune it (`semsearch tune %s`) or "
                "search with a larger nprobe/efSearch",
                index,
                mean,
                low,
                high,
                len(kept.recalls),
                target,
                index,
            )
        elif kept.warned and mean >= target:  # warned once until it is back at its target
            kept.warned = False
            log.info("index %s: recall@10 of served queries is back at %.3f", index, mean)


def _single_threaded_torch() -> None:
    """The exact search runs in torch: on one thread, so `time.thread_time` sees all of its
    CPU (the server's own searches are single-threaded already)."""
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
