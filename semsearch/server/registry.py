"""The indexes a server answers from: opened once, kept on their current generation.

Indexes built by the same model share one encoder and one micro-batcher. A background
thread moves each searcher to a new generation (written by the API, or by `semsearch add`
in another process) within a second; searches in flight finish on theirs. An index that
stops opening, or whose files a search finds damaged, is marked unhealthy with the reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from semsearch.errors import SemsearchError
from semsearch.models.exported_query_encoder import openvino_installed
from semsearch.search.searcher import Searcher
from semsearch.server.batcher import MicroBatcher
from semsearch.server.schemas import ServerConfig
from semsearch.server.warmup import NothingToWarm, QueryPrecisionWarmup
from semsearch.store.folders import IndexFolder, find_index, list_indexes

log = logging.getLogger(__name__)


def release_free_memory() -> None:
    """Hand freed heap memory back to the OS (Arrow's pool, and glibc's `malloc_trim`):
    without it a server changed every few seconds grows by the peak of each change, kept in
    its threads' arenas (+220 MB after the first 1,000-row add on the 841k index)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()  # Arrow's own allocator keeps freed pages too
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not glibc
        ctypes.CDLL(None).malloc_trim(0)


CPU_SUB_BATCH = 8


@dataclass
class ServedIndex:
    """One index as the server holds it: its searcher, its encoder's batcher, its health."""

    name: str
    folder: IndexFolder
    searcher: Searcher | None
    batcher: MicroBatcher | None
    problem: str | None = None
    # (generation, why): a search found the index's files damaged; it stays unhealthy until
    # it moves to another generation (a rollback or a rebuild).
    damage: tuple[int, str] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def healthy(self) -> bool:
        return self.problem is None and self.searcher is not None


def served_folders(index_dir: Path, names: list[str] | None) -> list[IndexFolder]:
    """The folders `names` (default: every index in `index_dir`); none is an error."""
    folders = [find_index(name, index_dir) for name in names] if names else list_indexes(index_dir)
    if not folders:
        raise SemsearchError(
            f"no indexes to serve in {index_dir}/: build one with `semsearch build`, or pass --index-dir"
        )
    return folders


class IndexRegistry:
    """Name -> `ServedIndex`, with one shared encoder per model and a refresher thread."""

    def __init__(
        self,
        config: ServerConfig,
        on_batch: Callable[[int], None] | None = None,
        on_phase: Callable[[str], None] | None = None,
    ) -> None:
        """Open every index (`on_phase` hears what is being loaded, for /ready)."""
        self.config = config
        self.index_dir = config.index_dir
        self.on_batch = on_batch
        self.on_phase = on_phase or (lambda phase: None)
        self._encoders: dict[tuple, tuple[object, MicroBatcher]] = {}
        self.warmups: list[QueryPrecisionWarmup | NothingToWarm] = []
        self.warmed: list[str] = []  # what start-up loaded and warmed, and how long each took
        self._model_s = 0.0  # of which loading models
        # Requests already run in parallel; FAISS's own threads on top of them would only
        # contend for the same cores.
        import faiss

        faiss.omp_set_num_threads(1)
        folders = served_folders(config.index_dir, config.names or None)
        self.indexes = {folder.name: self._open(folder) for folder in folders}
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None
        self._writes = 0  # changes through the API in progress (`writing`)
        self._writes_changed = threading.Condition()

    def get(self, name: str | None) -> ServedIndex:
        """The index `name` (or the only one served); a SemsearchError names the choices."""
        if name is None:
            if len(self.indexes) == 1:
                return next(iter(self.indexes.values()))
            raise SemsearchError(
                "several indexes are served: name one with index=NAME (one of "
                f"{', '.join(self.indexes)})"
            )
        served = self.indexes.get(name)
        if served is None:
            raise LookupError(
                f"no index named {name!r}: served indexes are {', '.join(self.indexes)}"
            )
        return served

    def start_refreshing(self, every_s: float = 0.25) -> None:
        self._refresher = threading.Thread(
            target=self._refresh_loop, args=(every_s,), name="semsearch-refresh", daemon=True
        )
        self._refresher.start()

    def close(self) -> None:
        """Stop the background work: the refresher, then each batcher once it has answered
        what is queued (a stopping server answers the requests it took)."""
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join()
        for _, batcher in self._encoders.values():
            batcher.close()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around a change made through the API, so that a stopping server can wait for it."""
        with self._writes_changed:
            self._writes += 1
        try:
            yield
        finally:
            with self._writes_changed:
                self._writes -= 1
                self._writes_changed.notify_all()

    def wait_for_writes(self, timeout_s: float) -> bool:
        """Whether every change in progress finished within `timeout_s` (each either writes
        its generation or leaves the index as it was: a generation is written last)."""
        with self._writes_changed:
            return self._writes_changed.wait_for(lambda: self._writes == 0, max(timeout_s, 0))

    def refresh(self, served: ServedIndex) -> None:
        """Move `served` to its current generation, or record why it cannot be opened."""
        with served.lock:
            try:
                if not served.folder.path.is_dir():
                    raise SemsearchError(f"the index folder {served.folder.path} is gone")
                if served.searcher is None:
                    served.searcher, served.batcher = self._searcher(served.folder)
                elif served.searcher.refresh():
                    log.info(
                        "index %s: now at generation %d", served.name, served.searcher.generation
                    )
                    release_free_memory()  # the old generation's pages, and the change's
                if served.damage is not None and served.damage[0] != served.searcher.generation:
                    served.damage = None  # rolled back or rebuilt: other files
                problem = served.damage[1] if served.damage is not None else None
                if served.problem is not None and problem is None:
                    log.info("index %s is healthy again", served.name)
                served.problem = problem
            except Exception as exc:  # one broken index must not stop the others
                message = (
                    str(exc) if isinstance(exc, SemsearchError) else f"{type(exc).__name__}: {exc}"
                )
                if served.problem != message:
                    log.warning("index %s is unhealthy: %s", served.name, message)
                served.problem = message

    def mark_damaged(self, served: ServedIndex, generation: int, message: str) -> None:
        """Record that a search of `served` at `generation` found its files damaged: it is
        unhealthy (503 to searches, named in /ready) until it moves to another generation."""
        with served.lock:
            if served.searcher is None or served.searcher.generation != generation:
                return  # already moved on: the next search opens the new generation's files
            served.damage = (generation, message)
            if served.problem != message:
                log.error("index %s is damaged: %s", served.name, message)
            served.problem = message

    def _refresh_loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            for served in list(self.indexes.values()):
                self.refresh(served)

    @property
    def warm(self) -> bool:
        """Whether every encoder has finished warming (queries in their chosen precision)."""
        return all(warmup.warm for warmup in self.warmups)

    @property
    def precision(self) -> str:
        """What queries are encoded in now, per model (for /ready)."""
        return "; ".join(warmup.state for warmup in self.warmups)

    def _open(self, folder: IndexFolder) -> ServedIndex:
        self.on_phase(f"opening the index {folder.name}")
        started, model_s = time.monotonic(), self._model_s
        searcher, batcher = self._searcher(folder)
        opened_s = time.monotonic() - started - (self._model_s - model_s)
        self.warmed.append(f"index {folder.name} {opened_s:.1f} s")
        if searcher.manifest.lexical is not None:
            self.on_phase(f"reading the lexical part of {folder.name}")
            started = time.monotonic()
            searcher.search(["warm-up"], k=1, mode="lexical")  # reads its BM25 files once
            self.warmed.append(f"its lexical part {time.monotonic() - started:.1f} s")
        return ServedIndex(folder.name, folder, searcher, batcher)

    def _searcher(self, folder: IndexFolder) -> tuple[Searcher, MicroBatcher | None]:
        """A searcher on `folder` whose encoder is shared with every index of the same model;
        an index of your own vectors that names no model gets no encoder (and no batcher)."""
        manifest = folder.manifest()
        if not manifest.has_model:
            return Searcher(folder), None
        spec = manifest.model
        key = (
            spec.name,
            spec.fingerprint,
            spec.pooling,
            spec.normalize,
            spec.max_length,
            spec.quantization,
            spec.document_prompt,  # an add through the server encodes with the index's
        )
        if key not in self._encoders:
            self.on_phase(f"loading the model {spec.name}")
            started = time.monotonic()
            exported = self._exported_encoder(spec)
            if exported is not None:
                self._encoders[key] = exported
            else:
                self._encoders[key] = self._torch_encoder(spec)
            encoder = self._encoders[key][0]
            loaded_s = time.monotonic() - started
            self._model_s += loaded_s
            self.warmed.append(f"encoder {spec.name} on {encoder.runtime} {loaded_s:.1f} s")
        encoder, batcher = self._encoders[key]
        return Searcher(folder, encoder=encoder), batcher

    def _workers(self) -> int:
        """One single-threaded encoder per core: 354 texts/s on 2 cores against 298 for one
        encoder on both (STS-B sentences, measured)."""
        return max(1, len(os.sched_getaffinity(0)))

    def _exported_encoder(self, spec) -> tuple[object, MicroBatcher] | None:
        """The checked OpenVINO export and its batcher, where there is one and the server
        encodes in fp32 on the CPU (`auto` included): no torch to import, no kernels to
        warm. None where the torch encoder must run (one log line says why)."""
        if self.config.device not in ("auto", "cpu") or not openvino_installed():
            return None
        from semsearch.models.exported_query_encoder import (
            ExportedQueryEncoder,
            import_openvino,
            native_bf16,
        )

        ov = import_openvino()
        wanted = self.config.precision
        if wanted == "auto":
            wanted = "bf16" if native_bf16(ov) and self._checked(spec, "bf16") else "fp32"
        encoder = ExportedQueryEncoder.open(spec, threads=1, precision=wanted)
        if encoder is None:
            return None
        self.warmups.append(NothingToWarm(f"{wanted} ({encoder.runtime})", wanted))
        batcher = self._batcher(
            lambda texts: encoder.encode(texts, batch_size=len(texts)),
            workers=self._workers(),
            group=CPU_SUB_BATCH,
            on_start=lambda: encoder.encode(["a warm-up query"]),
        )
        return encoder, batcher

    def _batcher(self, encode, **options) -> MicroBatcher:
        """A micro-batcher of `encode` with the server's batch settings (`options`: the
        batcher's workers, group and hooks)."""
        config = self.config
        return MicroBatcher(encode, config.max_batch, config.max_wait_ms, self.on_batch, **options)

    @staticmethod
    def _checked(spec, precision: str) -> bool:
        """Whether the export of `spec` passed its check in `precision` (no log line)."""
        from semsearch.models.exported_query_encoder import (
            export_path,
            import_openvino,
            query_files,
        )

        facts_path = query_files(export_path(spec, import_openvino().get_version()))[0]
        try:
            return precision in json.loads(facts_path.read_text(encoding="utf-8"))["checked"]
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def _torch_encoder(self, spec) -> tuple[object, MicroBatcher]:
        """The torch encoder and its batcher; bf16 is chosen and warmed between batches."""
        import torch

        from semsearch.models.bi_encoder import BiEncoder

        encoder = BiEncoder.for_index(spec, self.config.device, "torch")
        # The queries gathered from many requests are encoded and answered in groups of
        # CPU_SUB_BATCH, shortest first: on a CPU, 32 STS-B sentences take 101 ms as four
        # length-sorted batches of 8 and 154 ms as one batch of 32, padded to its longest
        # (measured, fp32).
        on_cpu = encoder.device.type == "cpu"
        group = CPU_SUB_BATCH if on_cpu else None
        workers = self._workers() if on_cpu else 1
        if on_cpu:
            torch.set_num_threads(1)
        largest = min(self.config.max_batch, group or self.config.max_batch)
        # Queries are answered in fp32 from the start; bf16 is chosen and its kernels
        # compiled between batches (server/warmup.py).
        warmup = QueryPrecisionWarmup(encoder, self.config.precision, largest, workers)
        self.warmups.append(warmup)

        def encode(texts: list[str], encoder=encoder, warmup=warmup):
            return encoder.encode(
                texts, batch_size=len(texts) if on_cpu else None, precision=warmup.precision()
            )

        def first_query(encoder=encoder) -> None:  # the fp32 path's own first-call costs
            encoder.encode(
                ["a warm-up query"], batch_size=1, precision="fp32" if on_cpu else "auto"
            )

        batcher = self._batcher(
            encode, workers=workers, group=group, on_start=first_query, on_idle=warmup.step
        )
        return encoder, batcher
