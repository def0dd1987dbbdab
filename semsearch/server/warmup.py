"""Start-up without a dead minute: the server answers at once, and warms in the background.

Why: choosing bf16 and compiling its kernels took 54-63 s on a 2-core CPU, during which
`serve` refused every connection. Now the indexes open in a thread, queries are answered
in fp32 once the model is loaded, and each encoder worker compiles bf16 between batches
and switches to it when ready (within cosine 0.9999 of fp32's vectors).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

from semsearch.models.query_precision import WARM_TOKENS, choose_query_precision, warm_steps

if TYPE_CHECKING:
    from semsearch.models.bi_encoder import BiEncoder

log = logging.getLogger(__name__)

T = TypeVar("T")


class Startup(Generic[T]):
    """Runs `load` in a thread; until it returns, `phase` says what the server is doing."""

    def __init__(self, load: Callable[[Startup[T]], T], log_failure: bool = True) -> None:
        self.started = time.monotonic()
        self.log_failure = log_failure  # off where the caller reports it (`serve` exits)
        self.phase = "loading the model and opening the indexes"
        self.result: T | None = None
        self.failure: str | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(load,), name="semsearch-startup", daemon=True
        )
        self._thread.start()

    def _run(self, load: Callable[[Startup[T]], T]) -> None:
        try:
            self.result = load(self)
        except Exception as exc:  # reported by /ready and every request, and logged
            self.failure = str(exc) or type(exc).__name__
            if self.log_failure:
                log.error("the server could not start: %s", self.failure)
        finally:
            self.done.set()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def wait(self, timeout: float | None = None) -> T | None:
        self.done.wait(timeout)
        return self.result


class QueryPrecisionWarmup:
    """Which precision each encoder thread encodes queries in, and the idle-time work that
    moves it from fp32 to bf16: `step()` runs one small piece (the probe, or one kernel
    shape) on the calling worker thread, whose kernel cache it fills."""

    def __init__(
        self, encoder: BiEncoder, requested: str, largest_batch: int, workers: int
    ) -> None:
        self.encoder = encoder
        self.requested = requested
        self.largest_batch = largest_batch
        self.workers = workers
        measure = requested == "auto" and encoder.device.type == "cpu" and not encoder.quantization
        # Without a measurement to make (GPU, int8, a precision asked for) the choice is known
        # at once; a bf16 one still compiles its kernels in the background.
        self.chosen: str | None = None if measure else choose_query_precision(encoder, requested)
        self._deciding = threading.Lock()
        self._decided = threading.Event()
        if self.chosen is not None:
            self._decided.set()
        self._local = threading.local()
        self._warmed = 0
        self._announced = False
        self._count = threading.Lock()
        self._started = time.monotonic()

    @property
    def warm(self) -> bool:
        """Whether queries are encoded in the precision chosen for them (warm-up is over)."""
        return self.chosen is not None and (self.chosen != "bf16" or self._warmed == self.workers)

    @property
    def state(self) -> str:
        """For /ready: what queries are encoded in, and what is still warming."""
        if self.chosen is None:
            return "fp32 (measuring whether bf16 is faster)"
        if self.chosen == "bf16" and self._warmed < self.workers:
            return f"fp32 (bf16 kernels warming: {self._warmed} of {self.workers} workers ready)"
        return self.chosen

    def precision(self) -> str:
        """The precision this thread encodes in now."""
        if self.chosen is None or (
            self.chosen == "bf16" and not getattr(self._local, "ready", False)
        ):
            return "fp32"
        return self.chosen

    def step(self) -> bool:
        """One piece of warm-up on this thread; False once it has none left."""
        if self.chosen is None:
            if not self._deciding.acquire(blocking=False):
                self._decided.wait(0.05)  # another worker is measuring
                return True
            try:
                log.info("measuring whether bf16 query encoding is faster than fp32 on this CPU")
                self.chosen = choose_query_precision(self.encoder, self.requested)
            finally:
                self._decided.set()
                self._deciding.release()
            return True
        if self.chosen != "bf16" or getattr(self._local, "ready", False):
            return False
        steps: Iterator[None] | None = getattr(self._local, "steps", None)
        if steps is None:
            with self._count:
                if not self._announced:
                    self._announced = True
                    log.info(
                        "compiling bf16 kernels for queries of up to %d tokens on %d encoder "
                        "workers, between batches; queries encode in fp32 meanwhile",
                        WARM_TOKENS,
                        self.workers,
                    )
            steps = self._local.steps = warm_steps(self.encoder, self.largest_batch)
        if next(steps, StopIteration) is not StopIteration:
            return True
        self._local.ready = True
        with self._count:
            self._warmed += 1
            if self._warmed == self.workers:
                log.info(
                    "queries now encode in bf16: kernels for %d workers compiled in %.1f s, "
                    "answering in fp32 meanwhile",
                    self.workers,
                    time.monotonic() - self._started,
                )
        return False


class NothingToWarm:
    """The `QueryPrecisionWarmup` of an encoder that is warm once loaded: the checked
    OpenVINO export (`exported_query_encoder`) runs in its precision from its first query."""

    warm = True

    def __init__(self, state: str, precision: str) -> None:
        self.state = state
        self._precision = precision

    def precision(self) -> str:
        return self._precision

    def step(self) -> bool:
        return False
