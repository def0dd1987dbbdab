"""Where a command's time goes: wall seconds per named phase, one timer for build, add, mine and query.

Why: a build that takes 66 s of which 23 s are encoding says nothing about the other 43 s
unless every step is timed the same way. A command opens a timer (`timing`); the code it
runs marks its steps (`with phase("train"):`), wherever they are and in any thread started
with `in_context`, and costs nothing where no timer is open. A phase opened inside another
in the same thread pauses it, so each phase's seconds are its own. Phases that run at once
in different threads (a part tokenised while another encodes) are each counted in full,
and the report says for how long they overlapped: the phases, less the overlap, plus the
time in no phase (`other_s`) make the wall time exactly. Facts a report should carry beside
the times (rows, candidates, the strategy chosen) are noted on the same timer (`note`,
`count`).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

_CURRENT: contextvars.ContextVar[PhaseTimer | None] = contextvars.ContextVar(
    "semsearch_phase_timer", default=None
)


class PhaseTimer:
    """The spans of named phases since the timer started, from any number of threads."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.started = clock()
        self._spans: list[tuple[str, float, float]] = []
        self._facts: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._stacks: list[list] = []  # each thread's open phases, for a report taken meanwhile

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase `name`, pausing the phase this thread was in."""
        stack = self._stack()
        now = self.clock()
        if stack:  # the enclosing phase stops counting while this one runs
            outer, since = stack[-1]
            self.record(outer, since, now)
        stack.append([name, now])
        try:
            yield
        finally:
            end = self.clock()
            _, since = stack.pop()
            self.record(name, since, end)
            if stack:
                stack[-1][1] = end

    def note(self, **facts: Any) -> None:
        """Keep facts beside the times (the last value of each name wins)."""
        with self._lock:
            self._facts.update(facts)

    def count(self, name: str, amount: int | float) -> None:
        """Add `amount` to the fact `name` (candidates scored, rows read, ...)."""
        with self._lock:
            self._facts[name] = self._facts.get(name, 0) + amount

    def report(self) -> PhaseReport:
        """The phases so far: each one's seconds, their overlap, the rest, the wall time."""
        end = self.clock()
        with self._lock:
            spans = list(self._spans)
            facts = dict(self._facts)
            spans.extend((stack[-1][0], stack[-1][1], end) for stack in self._stacks if stack)
        by_name: dict[str, list[tuple[float, float]]] = {}
        for name, start, stop in spans:
            by_name.setdefault(name, []).append((start, stop))
        seconds = {name: _union(intervals) for name, intervals in by_name.items()}
        covered = _union([(start, stop) for _, start, stop in spans])
        wall = end - self.started
        return PhaseReport(
            wall_s=wall,
            phases=seconds,
            overlapped_s=max(sum(seconds.values()) - covered, 0.0),
            other_s=max(wall - covered, 0.0),
            facts=facts,
        )

    def _stack(self) -> list[list]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
            with self._lock:
                self._stacks.append(stack)
        return stack

    def record(self, name: str, start: float, stop: float) -> None:
        """A span of phase `name` measured by the caller on this timer's clock (a batch
        encoded for many requests at once, of which this is one)."""
        if stop > start:
            with self._lock:
                self._spans.append((name, start, stop))


def _union(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of `intervals`."""
    total, reach = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= reach:
            continue
        total += stop - max(start, reach)
        reach = stop
    return total


@dataclass(frozen=True)
class PhaseReport:
    """Where the time went: `phases` (seconds each, in the order they first ran),
    `overlapped_s` (counted in more than one phase at once), `other_s` (in none), so
    sum(phases) - overlapped_s + other_s == wall_s; and the facts noted beside them."""

    wall_s: float
    phases: dict[str, float]
    overlapped_s: float = 0.0
    other_s: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, digits: int = 3) -> dict[str, Any]:
        """As recorded in a manifest's operation and printed under `--json` (seconds rounded
        to `digits`: ms for a command, finer for a query)."""
        record: dict[str, Any] = {
            "wall_s": round(self.wall_s, digits),
            "phases": {name: round(value, digits) for name, value in self.phases.items()},
            "overlapped_s": round(self.overlapped_s, digits),
            "other_s": round(self.other_s, digits),
        }
        if self.facts:
            record["facts"] = dict(self.facts)
        return record

    def line(self) -> str:
        """One line for a log: each phase, the overlap, the rest, the wall time."""
        shown = ", ".join(f"{name} {_seconds(value)}" for name, value in self.phases.items())
        overlap = f", {_seconds(self.overlapped_s)} of them overlapped" if self.overlapped_s else ""
        return f"{shown or 'no phase'}{overlap}; other {_seconds(self.other_s)}; wall {_seconds(self.wall_s)}"


def _seconds(value: float) -> str:
    return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def current() -> PhaseTimer | None:
    """The timer open in this context, if any."""
    return _CURRENT.get()


@contextmanager
def timing(fresh: bool = False, timer: PhaseTimer | None = None) -> Iterator[PhaseTimer]:
    """The timer of the command running here: the one open already (a caller that started
    the clock earlier), else a new one, open for the block. `fresh`: always a new one (a
    query explained inside a timed command times only itself); `timer`: this one (a
    server's request, timed from its arrival, continued in another thread)."""
    if timer is None and not fresh and (open_already := _CURRENT.get()) is not None:
        yield open_already
        return
    timer = timer or PhaseTimer()
    token = _CURRENT.set(timer)
    try:
        yield timer
    finally:
        _CURRENT.reset(token)


@contextmanager
def untimed() -> Iterator[None]:
    """No timer open for the block: the searches a build's tuning runs are its `tune`
    phase, not queries with phases of their own."""
    token = _CURRENT.set(None)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase `name` on the open timer; nothing where none is open."""
    timer = _CURRENT.get()
    if timer is None:
        yield
        return
    with timer.phase(name):
        yield


def note(**facts: Any) -> None:
    """`PhaseTimer.note` on the open timer, if any."""
    timer = _CURRENT.get()
    if timer is not None:
        timer.note(**facts)


def count(name: str, amount: int | float) -> None:
    """`PhaseTimer.count` on the open timer, if any."""
    timer = _CURRENT.get()
    if timer is not None:
        timer.count(name, amount)


def timed(items: Iterable[Item], name: str) -> Iterator[Item]:
    """`items`, each one's making (a read, a generator's step) timed as phase `name`."""
    iterator = iter(items)
    while True:
        with phase(name):
            try:
                item = next(iterator)
            except StopIteration:
                return
        yield item


def timed_call(name: str, work: Callable[..., Result]) -> Callable[..., Result]:
    """`work`, each call timed as phase `name`."""

    def run(*args: Any, **kwargs: Any) -> Result:
        with phase(name):
            return work(*args, **kwargs)

    return run


def in_context(work: Callable[..., Result]) -> Callable[..., Result]:
    """`work` run in a copy of this context, so a thread it runs in times into the caller's
    timer (a new thread starts without the caller's context)."""
    context = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> Result:
        return context.run(work, *args, **kwargs)

    return run


class Background:
    """`work()` started now in a daemon thread that times into this context's timer, its
    result (or its exception) collected by `result()`: two reads that release the GIL (two
    Parquet columns decoded) then use both cores. Work that hands the GIL back thousands of
    times (hashlib over a file in 256 KiB reads) is better left in the caller's thread: beside
    Python work on busy cores each hand-back can wait a switch interval. A daemon, so an
    interrupt never waits for it."""

    def __init__(self, work: Callable[[], Result], name: str) -> None:
        self._value: Any = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = work()
            except BaseException as exc:  # raised in the caller by `result`
                self._error = exc

        self._thread = threading.Thread(target=in_context(run), name=name, daemon=True)
        self._thread.start()

    def result(self) -> Any:
        """What `work` returned, once it has (its exception raised here)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
