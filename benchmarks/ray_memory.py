"""`ray_build.py --own-vectors` / `--mine-own-vectors`: the driver's peak memory of a Ray
build, or of `mine --index --engine ray`, against the rows.

Why a figure of its own: a cluster build whose driver gathers ids, vectors or the index
grows with the corpus until the driver is the machine that limits it. Here the driver's
anonymous resident memory (what it cannot hand back) is sampled while it builds, and the
Ray workers' beside it, at each size; flat figures across sizes mean nothing is gathered.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import Sampler, proc_status_kib, record, unit_vectors, vector_column

from semsearch.distributed import RayOptions, build_index_on_ray, mine_index_on_ray
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.mining import MiningOptions
from semsearch.store.folders import IndexFolder

DIMENSION = 384
WRITE_ROWS = 65_536  # rows generated and written at a time


def write_vectors(path: Path, rows: int, seed: int = 0, texts: bool = False) -> Path:
    """`rows` random unit vectors (column `emb`, a fixed-size list) and a row number `n`
    (with `texts`, a distinct `text` each too, for mining)."""
    if path.is_file() and pq.ParquetFile(path).metadata.num_rows == rows:
        return path
    rng = np.random.default_rng(seed)
    fields = [("n", pa.int64()), ("emb", pa.list_(pa.float32(), DIMENSION))]
    schema = pa.schema(fields + ([("text", pa.string())] if texts else []))
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, WRITE_ROWS):
            count = min(WRITE_ROWS, rows - start)
            emb = vector_column(unit_vectors(rng, count, DIMENSION))
            columns = {"n": np.arange(start, start + count), "emb": emb}
            if texts:
                columns["text"] = [f"row {n}" for n in range(start, start + count)]
            writer.write_table(pa.table(columns, schema=schema))
    return path


def status_kib(pid: int | str, field: str) -> int:
    """A field of /proc/PID/status in KiB (0 when the process is gone)."""
    return proc_status_kib(pid, (field,)).get(field, 0)


def ray_workers() -> list[int]:
    """Process ids of the Ray worker processes (titles `ray::...`) on this machine."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and name != str(os.getpid()):
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if handle.read(5) == b"ray::":
                        pids.append(int(name))
            except OSError:
                continue
    return pids


class MemorySampler(Sampler):
    """Samples the driver's RssAnon and each Ray worker's RssAnon in a thread (KiB peaks)."""

    def __init__(self, every_s: float = 0.1) -> None:
        super().__init__(every_s)
        self.driver_anon = self.worker_anon = self.workers_total = 0

    def __enter__(self) -> MemorySampler:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")  # resets VmHWM: the peak from here on
        return super().__enter__()

    def sample(self) -> None:
        self.driver_anon = max(self.driver_anon, status_kib("self", "RssAnon"))
        workers = [status_kib(pid, "RssAnon") for pid in ray_workers()]
        self.worker_anon = max([self.worker_anon, *workers])
        self.workers_total = max(self.workers_total, sum(workers))


def two_nodes():
    """A simulated two-node cluster of one CPU a node, as the Ray tests use."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    return cluster


def own_vectors_mining(args, sizes: list[int]) -> None:
    """For each size, an own-vectors index with texts (built locally once, kept), mined with
    `mine --index --engine ray` on two simulated nodes; records the memory figures."""
    folder = args.out_dir / "ray_build"
    built = {}
    for rows in sizes:
        name = f"mine-{rows}-{args.index.replace(',', '_')}"
        if not (folder / "indexes" / name / "manifest.json").is_file():
            corpus = write_vectors(folder / f"texts_{rows}.parquet", rows, texts=True)
            build_index(
                BuildOptions(
                    corpus=corpus,
                    name=name,
                    model=None,
                    vector_column="emb",
                    text_column="text",
                    index=args.index,
                    out_dir=folder / "indexes",
                    show_progress=False,
                )
            )
        built[rows] = name
    cluster = two_nodes()
    try:
        for name in built.values():
            mining = MiningOptions(top_k=10, top=100_000, show_progress=False)
            started = time.perf_counter()
            with MemorySampler() as memory:
                result = mine_index_on_ray(
                    name,
                    folder / "indexes",
                    mining,
                    RayOptions(cluster.address, show_progress=False),
                )
            seconds = time.perf_counter() - started
            manifest = IndexFolder(folder / "indexes" / name).manifest()
            figures = {
                "mode": "mine_own_vectors_two_nodes",
                "rows": manifest.rows,
                "index": manifest.index.factory,
                "vectors_mib": round(manifest.rows * DIMENSION * 4 / 2**20, 1),
                "structure": result.stats.structure,
                "pairs": len(result),
                "seconds": round(seconds, 1),
                "driver_peak_rss_anon_mib": round(memory.driver_anon / 1024, 1),
                "driver_vm_hwm_mib": round(status_kib("self", "VmHWM") / 1024, 1),
                "worker_peak_rss_anon_mib": round(memory.worker_anon / 1024, 1),
                "workers_peak_total_rss_anon_mib": round(memory.workers_total / 1024, 1),
            }
            print(figures, flush=True)
            record(args, "ray_mine_memory", figures)
    finally:
        cluster.shutdown()


def own_vectors_builds(args, sizes: list[int]) -> None:
    """Build each size on a simulated two-node cluster and record the memory figures."""
    folder = args.out_dir / "ray_build"
    cluster = two_nodes()
    try:
        for rows in sizes:
            corpus = write_vectors(folder / f"vectors_{rows}.parquet", rows)
            options = BuildOptions(
                corpus=corpus,
                name=f"own-{rows}",
                model=None,
                vector_column="emb",
                index=args.index,
                out_dir=folder / "indexes",
                overwrite=True,
                show_progress=False,
            )
            started = time.perf_counter()
            with MemorySampler() as memory:
                built = build_index_on_ray(
                    options, RayOptions(cluster.address, show_progress=False)
                )
            seconds = time.perf_counter() - started
            manifest = built.manifest()
            figures = {
                "mode": "own_vectors_two_nodes",
                "rows": manifest.rows,
                "index": manifest.index.factory,
                "segments": len(manifest.segments),
                "seconds": round(seconds, 1),
                "driver_peak_rss_anon_mib": round(memory.driver_anon / 1024, 1),
                "driver_vm_hwm_mib": round(status_kib("self", "VmHWM") / 1024, 1),
                "worker_peak_rss_anon_mib": round(memory.worker_anon / 1024, 1),
                "workers_peak_total_rss_anon_mib": round(memory.workers_total / 1024, 1),
                "search_params": manifest.index.search_params,
            }
            print(figures, flush=True)
            record(args, "ray_build_memory", figures)
            shutil.rmtree(built.path)
    finally:
        cluster.shutdown()
