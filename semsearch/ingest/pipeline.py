"""The build's stages overlapped: read -> tokenise -> encode -> write, joined by bounded queues.

Why: one after the other, the device idles while the next part is read and tokenised and
the last one written. Reading and tokenising run in threads ahead of the encoder, writing
in one behind it; the encoder stays in the caller's thread, where Ctrl-C lands. At most
`3 x depth + 4` items are alive at once. The first exception in any stage stops the
others (the writer first writes what was encoded, so a resume keeps it) and is raised once
in the caller; `depth=0` runs the stages one after the other.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any

from semsearch.phases import in_context, timed, timed_call

# Queue slots between stages: one part ready ahead of the encoder is enough to hide
# reading and tokenising, and keeps memory to a few parts.
DEFAULT_DEPTH = 1
POLL_SECONDS = 0.05
_DONE = object()


class Stopped(Exception):
    """Raised inside a stage when another stage failed or the caller stopped: unwind quietly."""


class Pipeline:
    """Runs `tokenise`, `encode` and `write` over `items`, overlapped; see the module docstring."""

    def __init__(self, depth: int = DEFAULT_DEPTH) -> None:
        if depth < 0:
            raise ValueError(f"depth must be 0 or more, not {depth}")
        self.depth = depth
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._error: BaseException | None = None

    def check(self) -> None:
        """Raise `Stopped` once another stage has failed: a long stage (the encoder's per-batch
        progress) calls it to give up within a batch rather than a part."""
        if self._stop.is_set():
            raise Stopped

    def run(
        self,
        items: Iterable[Any],
        tokenise: Callable[[Any], Any],
        encode: Callable[[Any], Any],
        write: Callable[[Any], None],
    ) -> None:
        """Every item of `items` through the three stages, in order; returns when all are written.
        Each stage is timed as its phase (`semsearch.phases`): read, tokenise, encode, write."""
        items = timed(items, "read")
        tokenise, encode = timed_call("tokenise", tokenise), timed_call("encode", encode)
        write = timed_call("write", write)
        if self.depth == 0:
            for item in items:
                write(encode(tokenise(item)))
            return
        read_q: queue.Queue = queue.Queue(self.depth)
        token_q: queue.Queue = queue.Queue(self.depth)
        write_q: queue.Queue = queue.Queue(self.depth)

        def reading() -> None:
            for item in items:
                self._put(read_q, item)
            self._put(read_q, _DONE)

        def tokenising() -> None:
            while (item := self._get(read_q)) is not _DONE:
                self._put(token_q, tokenise(item))
            self._put(token_q, _DONE)

        def writing() -> (
            None
        ):  # parts encoded before a failure are still written (a resume keeps them)
            while (item := self._get(write_q, drain=True)) is not _DONE:
                write(item)

        threads = [self._thread(reading, "read"), self._thread(tokenising, "tokenise")]
        writer = self._thread(writing, "write")
        try:
            while (item := self._get(token_q)) is not _DONE:
                self._put(write_q, encode(item))
            self._put(write_q, _DONE)
            while writer.is_alive():  # a timed join, so Ctrl-C is not held up
                writer.join(POLL_SECONDS)
        except Stopped:
            pass
        except BaseException as exc:
            self._fail(exc)
        finally:
            self._stop.set()
            for thread in [*threads, writer]:
                thread.join()
        if self._error is not None:
            raise self._error

    def _thread(self, work: Callable[[], None], name: str) -> threading.Thread:
        def guarded() -> None:
            try:
                work()
            except Stopped:
                pass
            except BaseException as exc:  # raised in the caller's thread by `run`
                self._fail(exc)

        # In the caller's context: the stage times into the caller's phase timer.
        thread = threading.Thread(target=in_context(guarded), name=f"semsearch-{name}", daemon=True)
        thread.start()
        return thread

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = exc
        self._stop.set()

    def _put(self, channel: queue.Queue, item: Any) -> None:
        while True:
            self.check()
            try:
                channel.put(item, timeout=POLL_SECONDS)
                return
            except queue.Full:
                continue

    def _get(self, channel: queue.Queue, drain: bool = False) -> Any:
        """The next item; after a failure, `Stopped` (with `drain`, once the queue is empty)."""
        while True:
            if not drain:
                self.check()
            try:
                return channel.get(timeout=POLL_SECONDS)
            except queue.Empty:
                self.check()
