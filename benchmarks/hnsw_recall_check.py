"""Why HNSW tuning on PyPI's fp32 vectors stops short: three recall measurements side by side.

Why: `semsearch tune` measures recall with the index's own vectors as queries (own row
dropped). On the fp32 HNSW graph over all PyPI summaries that capped at 0.92, while the
trade-off benchmark's held-out rows reached 0.965. This script puts on one slice of the
stored vectors (tie-aware recall@10, efConstruction 80):
  1. held-out: queries removed from the graph before it is built, with duplicates kept;
  2. the same with exact-duplicate vectors removed first (are duplicates the cause?);
  3. own-vector: queries left in the graph, measured as `semsearch tune` does.
With `--full-index NAME` it also measures that index's recall on out-of-domain queries
(Debian short descriptions) at a few efSearch values.

    python benchmarks/hnsw_recall_check.py --source pypi --rows 200000 --full-index pypi-hnsw
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from build_pypi import WARMUP, sample_queries
from common import (
    DEFAULT_OUT_DIR,
    add_threads_option,
    base_parser,
    environment,
    record,
    set_threads,
)

from semsearch.ann.exact import exact_knn
from semsearch.index.manifest import IndexSpec
from semsearch.index.store import IndexFolder
from semsearch.index.tune import tie_aware_recall, tune_against_exact
from semsearch.index.vector_index import (
    VectorIndex,
    higher_is_better,
    prepare_vectors,
)
from semsearch.search import Searcher
from semsearch.training.vectors import index_vectors

EF_SEARCH = (64, 256)
HNSW = IndexSpec("HNSW32,Flat", "HNSW32,Flat", "cosine")


def hnsw(vectors: np.ndarray) -> VectorIndex:
    """HNSW32,Flat over `vectors` (ids = their positions), as semsearch builds it: `create`
    sets efConstruction to HNSW_EF_CONSTRUCTION (80)."""
    index = VectorIndex.create(HNSW, vectors.shape[1])
    index.add(vectors, np.arange(len(vectors)))
    return index


def everything(vectors: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """`vectors` as the one (ids, vectors) part of an exact search, ids = positions."""
    return [(np.arange(len(vectors)), vectors)]


def held_out(vectors: np.ndarray, queries: int, rng: np.random.Generator) -> dict[int, float]:
    """Tie-aware recall@10 of `queries` random rows, removed from the graph first."""
    rows = rng.choice(len(vectors), queries, replace=False)
    kept = np.ones(len(vectors), dtype=bool)
    kept[rows] = False
    database, probes = vectors[kept], vectors[rows]
    index = hnsw(database)
    scores, _ = exact_knn(probes, everything(database), 10, "cosine")
    recall = {}
    for ef in EF_SEARCH:
        found_scores, found = index.search(probes, 10, {"efSearch": ef})
        recall[ef] = round(tie_aware_recall(found_scores, found, scores[:, 9], 10, True), 4)
    return recall


def own_vectors(vectors: np.ndarray, queries: int, rng: np.random.Generator) -> dict:
    """`semsearch tune`'s measure: queries left in the graph, their own row dropped."""
    rows = rng.choice(len(vectors), queries, replace=False)
    # exact top-11 over all rows, then each query's own row dropped from both sides
    result = tune_against_exact(hnsw(vectors), vectors[rows], lambda: everything(vectors), target=0.95,
                                k=10, query_ids=rows)  # fmt: skip
    return {"efSearch_for_0.95": result.value, "met": result.met, "tried": result.tried}


def out_of_domain(args, name: str) -> dict[int, float]:
    """Tie-aware recall@10 of Debian short descriptions on the full index `name`."""
    searcher = Searcher(IndexFolder(args.index_dir / name), device="cpu")  # the index's model
    metric = searcher.manifest.index.metric
    texts = sample_queries(args.data_dir, "debian", WARMUP + args.queries, 0)[WARMUP:]
    probes = prepare_vectors(searcher.encoder.encode(texts), metric)
    scores, _ = searcher.snapshot.exact_search(probes, 10)  # over the stored vectors
    recall = {}
    for ef in (64, 128, 256, 512):
        found_scores, found = searcher.snapshot.search(probes, 10, {"efSearch": ef})
        recall[ef] = round(tie_aware_recall(found_scores, found, scores[:, 9], 10,
                                            higher_is_better(metric)), 4)  # fmt: skip
    return recall


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--source", default="pypi", help="an index: its stored vectors")
    parser.add_argument("--rows", type=int, default=200_000, help="the slice of its vectors")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--full-index", default=None, help="an HNSW index for the Debian check")
    parser.add_argument("--index-dir", type=Path, default=DEFAULT_OUT_DIR / "indexes")
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    source = IndexFolder(args.index_dir / args.source)
    # its stored vectors (live rows, row order), unit length as the cosine index holds them
    vectors = prepare_vectors(index_vectors(source)[: args.rows], "cosine")
    unique = np.unique(vectors, axis=0)
    results = {
        "rows": len(vectors), "unique_rows": len(unique),
        "held_out": held_out(vectors, args.queries, np.random.default_rng(0)),
        "held_out_unique": held_out(unique, args.queries, np.random.default_rng(0)),
        "own_vectors": own_vectors(vectors, args.queries, np.random.default_rng(0)),
    }  # fmt: skip
    if args.full_index:
        results["debian_queries_on_" + args.full_index] = out_of_domain(args, args.full_index)
    for name, value in results.items():
        print(f"{name}: {value}", flush=True)
    payload = {"benchmark": "hnsw_recall_check", "environment": environment(),
               "args": {key: str(value) for key, value in vars(args).items()}, **results}  # fmt: skip
    record(args, "hnsw_recall_check", payload)


if __name__ == "__main__":
    main()
