"""Dynamic micro-batching: queries that arrive together are encoded in one model call.

Why: a transformer encodes 32 short queries in little more time than one. A worker thread
takes what has arrived, waits at most `max_wait_ms` for more (only while other requests are
in flight: a lone client never waits), encodes it (in groups of `group` texts, shortest
first) and runs each request's `then` on its rows in the same thread, so a request changes
threads once. With `workers` > 1 each thread batches on its own (on a CPU, one
single-threaded encoder per core is faster); `on_idle` is work done in small steps while
the queue is empty (compiling bf16 kernels).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

Encode = Callable[[list[str]], np.ndarray]


@dataclass
class _Pending:
    texts: list[str]
    future: Future
    then: Callable[[np.ndarray], object] | None = None


class MicroBatcher:
    """Encodes texts submitted from any thread in shared batches, on one worker thread."""

    def __init__(
        self,
        encode: Encode,
        max_batch: int = 64,
        max_wait_ms: float = 3.0,
        on_batch: Callable[[int], None] | None = None,
        workers: int = 1,
        group: int | None = None,
        on_start: Callable[[], None] | None = None,
        on_idle: Callable[[], bool] | None = None,
    ) -> None:
        if max_batch < 1 or max_wait_ms < 0 or workers < 1 or (group is not None and group < 1):
            raise ValueError(
                "max_batch, workers and group must be at least 1, max_wait_ms at least 0"
            )
        self.encode = encode
        self.max_batch = max_batch
        self.group = group
        self.on_start = on_start
        self.on_idle = on_idle
        self.max_wait_s = max_wait_ms / 1000
        self.on_batch = on_batch
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._in_flight = 0  # submitted and not yet answered
        self._count_lock = threading.Lock()
        self._workers = [
            threading.Thread(
                target=self._run, args=(number,), name=f"semsearch-encoder-{number}", daemon=True
            )
            for number in range(workers)
        ]
        self._started = [threading.Event() for _ in self._workers]
        for worker in self._workers:
            worker.start()
        for started in self._started:  # ready only once every worker has run `on_start`
            started.wait()

    def submit(
        self, texts: Sequence[str], then: Callable[[np.ndarray], object] | None = None
    ) -> Future:
        """A future of the texts' vectors [len(texts), dimension], or of `then(vectors)`
        (run on the worker thread; what it raises goes to the future)."""
        future: Future = Future()
        with self._count_lock:
            self._in_flight += 1
        future.add_done_callback(self._finished)
        self._queue.put(_Pending(list(texts), future, then))
        return future

    def _finished(self, _: Future) -> None:
        with self._count_lock:
            self._in_flight -= 1

    def close(self) -> None:
        """Finish what is queued, then stop the workers."""
        for _ in self._workers:
            self._queue.put(None)
        for worker in self._workers:
            worker.join()

    def _run(self, number: int) -> None:
        if self.on_start is not None:  # e.g. per-thread warm-up; a failure costs speed only
            try:
                self.on_start()
            except Exception:
                log.exception("the encoder worker's start-up step failed")
        self._started[number].set()
        carried: _Pending | None = None
        idle_work = self.on_idle is not None
        while True:
            while carried is None and idle_work and self._queue.empty():
                idle_work = self._idle_step()
            first = carried or self._queue.get()
            carried = None
            if first is None:
                return
            batch, size = [first], len(first.texts)
            # Waiting pays only while other requests are being served: their clients are
            # the ones likely to ask again within the wait. A lone client is answered at once.
            wait_s = self.max_wait_s if self._in_flight > 1 else 0.0
            deadline = time.monotonic() + wait_s
            while size < self.max_batch:
                try:
                    waiting = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if waiting is None:  # closing: encode what we have, then stop
                    self._queue.put(None)  # the stop is taken again, at the top of the loop
                    break
                if size + len(waiting.texts) > self.max_batch:
                    carried = waiting  # it starts the next batch
                    break
                batch.append(waiting)
                size += len(waiting.texts)
            if self.on_batch is not None:
                self.on_batch(size)
            for group in self._groups(batch):
                self._encode(group)

    def _idle_step(self) -> bool:
        """One step of `on_idle`; False when it has no more (or failed: it costs speed only)."""
        try:
            return bool(self.on_idle())  # type: ignore[misc]
        except Exception:
            log.exception("the encoder worker's idle work failed; it stops")
            return False

    def _groups(self, batch: list[_Pending]) -> list[list[_Pending]]:
        """The batch in encoder calls of about `group` texts, shortest requests first: texts
        of like length pad little, and the first group's requests are answered while the
        next is encoded instead of all waiting for the whole batch."""
        if self.group is None:
            return [batch]
        ordered = sorted(batch, key=lambda pending: max(map(len, pending.texts), default=0))
        groups: list[list[_Pending]] = [[]]
        size = 0
        for pending in ordered:
            if groups[-1] and size + len(pending.texts) > self.group:
                groups.append([])
                size = 0
            groups[-1].append(pending)
            size += len(pending.texts)
        return groups

    def _encode(self, batch: list[_Pending]) -> None:
        texts = [text for pending in batch for text in pending.texts]
        try:
            vectors = self.encode(texts)
        except BaseException as exc:  # each waiting request gets the failure, the worker lives
            for pending in batch:
                pending.future.set_exception(exc)
            return
        start = 0
        for pending in batch:
            rows = vectors[start : start + len(pending.texts)]
            start += len(pending.texts)
            if pending.then is None:
                pending.future.set_result(rows)
                continue
            try:
                result = pending.then(rows)
            except BaseException as exc:  # this request's failure only
                pending.future.set_exception(exc)
            else:
                pending.future.set_result(result)
