"""Index structures side by side on one set of vectors: build time, memory, recall@10, QPS.

Why: `auto` and `--target-recall` pick an index and its search parameter for the user; this
script shows the whole trade-off they pick from, on the largest real corpus here (the
841,708 PyPI summaries, encoded once by `semsearch build`), so the choice can be checked.

    python benchmarks/index_tradeoff.py --index pypi              # vectors of an index folder
    python benchmarks/index_tradeoff.py --index pypi-first20000 --types flat,ivf1024,hnsw16

The vectors are read back from the index folder, which stores them beside its FAISS
structures (float16 ones are widened to float32). `--queries` of them, drawn at random, are
held out: removed from the database and used as queries, so no query finds itself. The truth
is exact search over the rest. Each structure is built on the same database; recall@10 is
measured on all queries at once, and queries/s one query at a time (what a user's search
call does, with nprobe / efSearch passed per call), with the threads given by `--threads`.
Each structure's fastest setting at `--target` recall is its `best` in the JSON line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
from common import (
    add_index_options,
    add_options,
    add_threads_option,
    args_dict,
    base_parser,
    environment,
    percentiles_ms,
    record,
    sample_rows,
    set_threads,
)

from semsearch.ann.exact import ExactSearch
from semsearch.ann.tune import rescored_recall
from semsearch.ann.vector_index import VectorIndex, prepare_vectors
from semsearch.store.folders import IndexFolder
from semsearch.training.vectors import index_vectors

K = 10
NPROBES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
EF_SEARCHES = (16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class Structure:
    """One index to build: its label, FAISS factory string and the parameter swept at search."""

    label: str
    factory: str
    parameter: str | None
    values: tuple[int, ...] = ()


STRUCTURES = {
    "flat": Structure("flat", "Flat", None),
    "ivf1024": Structure("ivf1024", "IVF1024,Flat", "nprobe", NPROBES),
    "ivf4096": Structure("ivf4096", "IVF4096,Flat", "nprobe", NPROBES),
    "hnsw16": Structure("hnsw16", "HNSW16,Flat", "efSearch", EF_SEARCHES),
    "hnsw32": Structure("hnsw32", "HNSW32,Flat", "efSearch", EF_SEARCHES),
    "ivfpq48": Structure("ivfpq48", "IVF4096,PQ48", "nprobe", NPROBES),
    "ivfpq96": Structure("ivfpq96", "IVF4096,PQ96", "nprobe", NPROBES),
}
DEFAULT_TYPES = ",".join(STRUCTURES)
# as semsearch.ann.vector_index's TRAIN_POINTS_PER_CENTROID: k-means time grows with the sample
TRAIN_POINTS_PER_LIST = 64


def with_options(structure: Structure, args) -> Structure:
    """`structure` with the command line's nprobe grid (IVF types)."""
    if args.nprobes and structure.parameter == "nprobe":
        values = tuple(int(value) for value in args.nprobes.split(","))
        return Structure(structure.label, structure.factory, structure.parameter, values)
    return structure


def load_vectors(folder: IndexFolder) -> tuple[np.ndarray, str]:
    """All vectors of an index folder (its live rows, in row order) and its metric, ready for
    search."""
    metric = folder.manifest().index.metric
    return prepare_vectors(index_vectors(folder), metric), metric


def split_queries(vectors: np.ndarray, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(database, queries): `count` random rows held out as queries, the rest as the database."""
    chosen = sample_rows(len(vectors), count, seed)
    kept = np.ones(len(vectors), dtype=bool)
    kept[chosen] = False
    return np.ascontiguousarray(vectors[kept]), np.ascontiguousarray(vectors[chosen])


def faiss_metric(metric_name: str) -> int:
    """Inner product for cosine and dot (the vectors are prepared), L2 otherwise."""
    return faiss.METRIC_INNER_PRODUCT if metric_name in ("cosine", "dot") else faiss.METRIC_L2


def exact_metric_name(metric_name: str) -> str:
    """The exact search's metric for FAISS's: inner product, else squared L2."""
    return "dot" if faiss_metric(metric_name) == faiss.METRIC_INNER_PRODUCT else "l2"


def build(
    structure: Structure,
    database: np.ndarray,
    metric_name: str,
    seed: int,
    ef_construction: int | None,
) -> tuple[VectorIndex, float]:
    """The filled index and its build seconds (training on TRAIN_POINTS_PER_LIST per list).

    The bare FAISS structure, without semsearch's id map or efConstruction: row numbers are
    its ids, and `--ef-construction` alone sets the graph's. `VectorIndex` searches it with
    per-call parameters.
    """
    index = faiss.index_factory(database.shape[1], structure.factory, faiss_metric(metric_name))
    if ef_construction and structure.parameter == "efSearch":
        faiss.downcast_index(index).hnsw.efConstruction = ef_construction
    started = time.perf_counter()
    if not index.is_trained:
        ivf = faiss.extract_index_ivf(index)
        sample_size = min(len(database), max(TRAIN_POINTS_PER_LIST * ivf.nlist, 65_536))
        rows = np.random.default_rng(seed).choice(len(database), size=sample_size, replace=False)
        index.train(database[np.sort(rows)])
    for start in range(0, len(database), 65_536):
        index.add(database[start : start + 65_536])
    return VectorIndex(index, metric_name), time.perf_counter() - started


def single_query_rate(
    index: VectorIndex, params: dict[str, int], queries: np.ndarray, min_seconds: float
) -> dict:
    """Queries/s and latency percentiles, one query per call, for at least `min_seconds`."""
    for query in queries[:10]:
        index.search(query[None, :], K, params)
    times = []
    started = time.perf_counter()
    while True:
        for query in queries:
            tick = time.perf_counter()
            index.search(query[None, :], K, params)
            times.append(time.perf_counter() - tick)
            if time.perf_counter() - started >= min_seconds and len(times) >= 20:
                break
        else:
            continue
        break
    return {
        "qps": round(len(times) / (time.perf_counter() - started), 1),
        **percentiles_ms(times, digits=3),
        "timed_queries": len(times),
    }


def measure(
    structure: Structure,
    database: np.ndarray,
    queries: np.ndarray,
    kth_exact: np.ndarray,
    metric_name: str,
    args,
) -> dict:
    """Build one structure and sweep its search parameter."""
    index, seconds = build(structure, database, metric_name, args.seed, args.ef_construction)
    size = int(faiss.serialize_index(index.faiss).size)
    print(f"{structure.label}: built in {seconds:.1f} s, {size / 2**20:.0f} MiB", flush=True)
    metric = exact_metric_name(metric_name)
    points = []
    for value in structure.values or (None,):
        params = {}
        if value is not None:
            if structure.parameter == "nprobe" and value > index.parameter_ceiling():
                continue
            params = {structure.parameter: value}
        # tie-aware: PyPI has many identical summaries, and PQ's own scores are estimates
        found = index.search(queries, K, params)[1]
        measured = rescored_recall(found, queries, database, kth_exact, metric)
        point = {
            "parameter": structure.parameter,
            "value": value,
            "recall_at_10": round(measured, 4),
            **single_query_rate(index, params, queries, args.min_seconds),
        }
        print(f"  {structure.parameter}={value}: {point}", flush=True)
        points.append(point)
        if point["recall_at_10"] >= 0.999:
            break
    return {
        "label": structure.label,
        "factory": structure.factory,
        "build_seconds": round(seconds, 1),
        "index_bytes": size,
        "points": points,
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_index_options(parser)
    add_options(
        parser,
        types=(DEFAULT_TYPES, f"comma-separated, from {', '.join(STRUCTURES)}"),
        queries=1000,
        min_seconds=(2.0, "time each search setting for at least this long"),
        target=0.95,
        nprobes=(
            str,
            "comma-separated nprobe values for the IVF types (default: 1-512, powers of 2)",
        ),
        ef_construction=(
            int,
            "HNSW efConstruction (default: FAISS's 40; semsearch's hnsw builds use 80)",
        ),
        seed=0,
    )
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    unknown = [name for name in args.types.split(",") if name not in STRUCTURES]
    if unknown:
        raise SystemExit(f"unknown types {unknown}: choose from {', '.join(STRUCTURES)}")

    path = Path(args.index)
    folder = IndexFolder(path if path.is_dir() else args.index_dir / args.index)
    vectors, metric_name = load_vectors(folder)
    database, queries = split_queries(vectors, args.queries, args.seed)
    del vectors
    print(
        f"{len(database):,} vectors of {folder.name} ({metric_name}), "
        f"{len(queries):,} held-out queries",
        flush=True,
    )
    exact = ExactSearch(database, exact_metric_name(metric_name))  # the library's
    kth_exact = exact.search(queries, K)[0][:, -1]

    results = [
        measure(
            with_options(STRUCTURES[name], args), database, queries, kth_exact, metric_name, args
        )
        for name in args.types.split(",")
    ]
    flat = next((r for r in results if r["label"] == "flat"), None)
    if flat is None:
        flat = measure(STRUCTURES["flat"], database, queries, kth_exact, metric_name, args)
    exact_qps = flat["points"][0]["qps"]

    payload = {
        "options": args_dict(args),
        "index": folder.name,
        "database_rows": len(database),
        "queries": len(queries),
        "k": K,
        "exact_qps": exact_qps,
        "results": results,
        "environment": environment(),
    }
    for result in results:  # the fastest setting at the target recall
        meeting = [p for p in result["points"] if p["recall_at_10"] >= args.target]
        result["best"] = max(meeting, key=lambda point: point["qps"], default=None)
        print(result["label"], result["build_seconds"], "s", result["best"], flush=True)
    record(args, "index_tradeoff", payload)


if __name__ == "__main__":
    main()
