"""The encode stage on Ray: readers cut the files into parts, an actor pool encodes and writes them.

`PartReader` actors turn each `ReadUnit` into one Ray Data row per part (its rows as Arrow
IPC, so a part never splits or merges on its way); `PartEncoder` actors load the model once
and write each part with `parts.encode_parts` into the index's folder, which every node
sees. A part is written whole or not at all, so a retried task rewrites the same part and a
job run again skips the parts already there.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa

from semsearch.distributed.cluster import Workers, require_ray
from semsearch.errors import ResumableError, SemsearchError, one_line
from semsearch.ingest.file_parts import ReadUnit, read_unit
from semsearch.ingest.parts import RowPart, encode_parts
from semsearch.io.own_vectors import VectorColumn
from semsearch.models.truncation import truncation_report
from semsearch.store.segment import SegmentWriter

log = logging.getLogger(__name__)


def to_ipc(rows: pa.Table | pa.RecordBatch) -> bytes:
    """Rows as Arrow IPC bytes: one value in a Ray Data row, whatever their columns."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def part_row(part: RowPart) -> dict:
    """The Ray Data row that carries one part to an encoder."""
    ids = np.asarray(part.ids, np.int64).tobytes()
    return {"part": part.part, "rows": to_ipc(part.batch), "ids": ids}


def unit_row(unit: ReadUnit) -> dict:
    """The Ray Data row that carries a `ReadUnit` to a reader (plain columns: Arrow keeps them)."""
    return {**asdict(unit), "wanted": list(unit.wanted)}


class PartReader:
    """Ray Data actor: every wanted part of the units in its batch, one row each.

    An actor, not a task: on a node whose CPUs the encoders hold, Ray ends an idle task
    worker within a second, and each new one would import semsearch again.
    """

    def __init__(self, text_column: str, part_rows: int, strict: bool) -> None:
        self.text_column, self.part_rows, self.strict = text_column, part_rows, strict

    def __call__(self, units: dict[str, np.ndarray]) -> Iterator[dict]:
        for position in range(len(units["path"])):
            unit = ReadUnit(
                str(units["path"][position]),
                int(units["start"][position]),
                int(units["stop"][position]),
                int(units["first_part"][position]),
                int(units["first_id"][position]),
                tuple(int(p) for p in units["wanted"][position]),
            )
            for part in read_unit(unit, self.text_column, self.part_rows, self.strict):
                row = part_row(part)
                yield {
                    name: np.array([value], dtype=object if name != "part" else np.int64)
                    for name, value in row.items()
                }


@dataclass(frozen=True)
class EncoderSetup:
    """How each actor gets its encoder: `load` (picklable, e.g. a partial of
    `BiEncoder.load`), checked against the driver's model by `fingerprint`."""

    load: Callable
    fingerprint: str
    device: str
    batch_size: int | None = None
    threads: int = 1  # torch threads of a CPU actor


class PartEncoder:
    """Ray Data actor: encodes each part it is given and writes it with `writer` (into the
    index's folder); the model is loaded once per actor, and refused where it differs from
    the driver's."""

    def __init__(
        self,
        setup: EncoderSetup,
        writer: SegmentWriter,
        text_column: str | None,
        vector_column: VectorColumn | None = None,
        save_slices: bool = False,
    ) -> None:
        """`save_slices`: a build's actor saves each part's vectors as they are encoded
        (`semsearch.ingest.saved_slices`), so a job killed halfway redoes little."""
        if setup.device == "cpu":
            import torch

            torch.set_num_threads(setup.threads)  # the CPUs the actor holds, no more
        self.encoder = setup.load()
        if setup.fingerprint and self.encoder.spec.fingerprint != setup.fingerprint:
            raise SemsearchError(
                f"the model on a worker ({self.encoder.spec.fingerprint[:12]}) is not the driver's "
                f"({setup.fingerprint[:12]}): install the same model on every node"
            )
        self.setup, self.writer = setup, writer
        self.text_column = text_column
        self.vector_column = vector_column  # your own vectors: read, not encoded
        self.save_slices = save_slices

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        truncated = []
        for part, data, ids in zip(batch["part"], batch["rows"], batch["ids"]):
            with truncation_report(self.encoder) as cut:
                encode_parts(
                    self.encoder,
                    [RowPart(int(part), from_ipc(data), np.frombuffer(ids, dtype=np.int64))],
                    self.writer,
                    self.text_column,
                    self.vector_column,
                    self.setup.batch_size,
                    depth=0,
                    save_slices=self.save_slices,
                )
            truncated.append(cut.cut)
        return {"truncated": np.array(truncated, np.int64)}


def encode_units(
    units: list[ReadUnit],
    workers: Workers,
    setup: EncoderSetup,
    writer: SegmentWriter,
    text_column: str | None,
    part_rows: int,
    strict: bool,
    vector_column: VectorColumn | None = None,
) -> int:
    """Read, encode and write the parts of `units` on the cluster (with `vector_column`, the
    rows' own vectors are checked and written instead); the texts cut at max_length."""
    ray = require_ray()
    workers = workers.at_most(sum(len(unit.wanted) for unit in units))
    dataset = ray.data.from_items([unit_row(unit) for unit in units]).map_batches(
        PartReader,
        batch_size=1,
        **workers.reader_args(),
        fn_constructor_args=(text_column, part_rows, strict),
    )
    return _encode(dataset, workers, setup, writer, text_column, True, vector_column)


def encode_held_parts(
    parts: Iterable[RowPart],
    workers: Workers,
    setup: EncoderSetup,
    writer: SegmentWriter,
    text_column: str,
    at_once: int | None = None,
) -> int:
    """Encode and write parts the driver reads (a chunked build's, an add's), `at_once` at a
    time (None: all), so the driver holds a few; the texts cut at max_length."""
    truncated, parts = 0, iter(parts)
    while rows := [part_row(part) for part in itertools.islice(parts, at_once)]:
        dataset = require_ray().data.from_items(rows)
        truncated += _encode(dataset, workers.at_most(len(rows)), setup, writer, text_column, False)
    return truncated


def _encode(
    dataset,
    workers: Workers,
    setup: EncoderSetup,
    writer: SegmentWriter,
    text_column: str | None,
    resumable: bool,
    vector_column: VectorColumn | None = None,
) -> int:
    dataset = dataset.map_batches(
        PartEncoder,
        batch_size=1,
        **workers.actor_args(),
        fn_constructor_args=(setup, writer, text_column, vector_column, resumable),
    )
    truncated = 0
    with job_errors("encoding", resumable=resumable):
        for batch in dataset.iter_batches(batch_format="numpy", batch_size=None):
            truncated += int(batch["truncated"].sum())
    return truncated


def actor_runtime(runtime: str, device: str) -> str:
    """`runtime` with `auto` resolved once, on the driver, for every actor: the actors then run
    what the driver chose, not each its own default (an actor without OpenVINO still falls
    back to torch with its one log line)."""
    if runtime != "auto":
        return runtime
    import torch

    from semsearch.models.bi_encoder import resolve_runtime

    return resolve_runtime("auto", torch.device(device))


@contextlib.contextmanager
def job_errors(stage: str, resumable: bool) -> Iterator[None]:
    """A Ray job's failure as one line: a user's mistake found on a worker as itself, anything
    else (a node lost beyond Ray's retries, a bug) as a `ResumableError` for resumable jobs."""
    try:
        yield
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        mistake = _semsearch_error(exc)
        if mistake is not None:
            raise SemsearchError(str(mistake)) from None
        reason = f"{type(exc).__name__}: {one_line(exc)}"
        if resumable:
            raise ResumableError(
                f"the Ray job failed while {stage} ({reason})",
                "the parts written so far are kept: run the same command again to resume",
            ) from exc
        raise SemsearchError(f"the Ray job failed while {stage} ({reason}): run it again") from exc


def _semsearch_error(exc: BaseException) -> SemsearchError | None:
    """The SemsearchError a worker raised, unwrapped from Ray's task errors."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if type(current) in (SemsearchError, ResumableError) or (
            isinstance(current, SemsearchError) and type(current).__module__.startswith("semsearch")
        ):
            return current
        pending += [getattr(current, "cause", None), current.__cause__, current.__context__]
    return None
