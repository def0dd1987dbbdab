"""The living index at scale, on a built index (841,708 PyPI summaries): filters, add, reindex.

- No filter, and filters keeping about 50 %, 5 % and 0.5 % of the rows (`hash(name) % 1000 < t`, unrelated
  to the texts): tie-aware recall@10 against exact search over the kept rows, the fewest
  hits returned, p50 latency of the search alone and of a whole `Searcher.search` call.
- `add` of N new rows (Debian packages' short descriptions) timed against the build.
- `reindex` to another structure (default IVF-PQ) from the stored vectors, without the
  model: its time, peak memory and recall@10.
The index is rolled back to the generation it started at, so the run can be repeated.

    python benchmarks/living_scale.py --name pypi --index-dir benchmarks/out/indexes
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import common
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from semsearch.ann.metrics import higher_is_better
from semsearch.ann.tune import recall_at_k, tie_aware_recall
from semsearch.ann.vector_index import prepare_vectors
from semsearch.index import Index
from semsearch.search.searcher import Searcher

K = 10


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_options(
        parser,
        name="pypi",
        index_dir=common.DEFAULT_OUT_DIR / "indexes",
        queries=100,
        add_rows=1000,
        reindex=("ivfpq", "structure to reindex to ('' skips it)"),
        in_domain=(
            False,
            "queries: texts of indexed rows the filter leaves out (so never their "
            "own hit), instead of Debian descriptions",
        ),
    )
    common.add_threads_option(parser)
    args = parser.parse_args()
    common.set_threads(args.threads)
    index = Index.open(args.name, args.index_dir)
    start = index.manifest
    debian = common.read_corpus(args.data_dir, "debian", columns=["package", "short_description"])
    debian = debian.take(
        pa.array(common.sample_rows(debian.num_rows, args.queries + args.add_rows))
    )
    queries = debian.slice(0, args.queries).column("short_description").to_pylist()
    report = {
        "environment": common.environment(),
        "args": common.args_dict(args),
        "rows": start.rows,
        "factory": start.index.factory,
        "search_params": start.index.search_params,
        "build_seconds": start.build_seconds,
    }
    searcher = index.searcher(device="cpu")
    vectors = prepare_vectors(searcher.encoder.encode(queries), start.index.metric)
    if args.in_domain:
        report["filters"] = [
            _in_domain(searcher, args.queries, share) for share in (0.5, 0.05, 0.005)
        ]
    else:
        report["filters"] = [
            filter_figures(searcher, queries, vectors, share) for share in (1.0, 0.5, 0.05, 0.005)
        ]
    if args.add_rows:
        report["add"] = _add(index, searcher, debian.slice(args.queries), args.add_rows)
    if args.reindex:
        report["reindex"] = _reindex(index, args.reindex, queries)
    index.rollback(start.generation)
    print(
        json.dumps({key: value for key, value in report.items() if key != "environment"}, indent=1)
    )
    common.record(args, "living_scale", report)


def filter_figures(
    searcher: Searcher, queries: list[str], vectors: np.ndarray, share: float
) -> dict:
    """A filter keeping about `share` of the rows (a hash of the name, unrelated to the texts;
    1: none): tie-aware recall@10 against exact search over the kept rows, the fewest hits,
    p50 ms of the search alone and of a whole `Searcher.search` call."""
    where = f"hash(name) % 1000 < {round(share * 1000)}" if share < 1 else None
    snapshot = searcher.snapshot
    # cached: latencies measure the search
    allowed = snapshot.where_mask(where) if where else snapshot.live
    exact_scores, _ = snapshot.exact_search(vectors, K, allowed)
    search_ms, call_ms, found_scores, found_rows = [], [], [], []
    for position, query in enumerate(queries):
        started = time.perf_counter()
        scores, rows = snapshot.search(vectors[position : position + 1], K, None, where)
        search_ms.append(1000 * (time.perf_counter() - started))
        found_scores.append(scores[0])
        found_rows.append(rows[0])
        started = time.perf_counter()
        searcher.search([query], k=K, where=where)
        call_ms.append(1000 * (time.perf_counter() - started))
    found_rows, found_scores = np.array(found_rows), np.array(found_scores)
    recall = tie_aware_recall(
        found_scores,
        found_rows,
        exact_scores[:, K - 1],
        K,
        higher_is_better(snapshot.manifest.index.metric),
    )
    row = {
        "where": where,
        "share": round(float(allowed.mean()), 4),
        "matches": int(allowed.sum()),
        "recall": round(recall, 4),
        "min_hits": int((found_rows >= 0).sum(axis=1).min()),
        "p50_search_ms": round(float(np.median(search_ms)), 2),
        "p50_query_ms": round(float(np.median(call_ms)), 2),
    }
    print(json.dumps(row), flush=True)
    return row


def _in_domain(searcher: Searcher, count: int, share: float) -> dict:
    """The filter measured with indexed rows it leaves out as queries: in the corpus' domain,
    as the tuning's own-vector queries are, but never a query's own row among the results."""
    where = f"hash(name) % 1000 < {round(share * 1000)}"
    outside = np.flatnonzero(searcher.snapshot.live & ~searcher.snapshot.where_mask(where))
    rows = np.sort(np.random.default_rng(2).choice(outside, count, replace=False))
    texts = searcher.metadata.column(searcher.manifest.text_column).take(pa.array(rows)).to_pylist()
    vectors = prepare_vectors(searcher.encoder.encode(texts), searcher.manifest.index.metric)
    return {
        **filter_figures(searcher, texts, vectors, share),
        "queries": "indexed rows outside the filter",
    }


def _add(index: Index, searcher: Searcher, debian: pa.Table, rows: int) -> dict:
    table = pa.table(
        {
            "name": [f"debian:{name}" for name in debian.column("package").to_pylist()],
            "month": ["2026-11"] * debian.num_rows,
            "summary": debian.column("short_description"),
        }
    )
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "new.parquet"
        pq.write_table(table.slice(0, rows), path)
        started = time.perf_counter()
        result = index.add(path, encoder=searcher.encoder)
        seconds = time.perf_counter() - started
    started = time.perf_counter()
    refreshed = searcher.refresh()
    refresh_seconds = time.perf_counter() - started
    hits = searcher.search([table.column("summary")[0].as_py()], k=1)[0]
    row = {
        "added": result.added,
        "seconds": round(seconds, 2),
        "refresh_seconds": round(refresh_seconds, 2),
        "refreshed": refreshed,
        "finds_a_new_row": bool(hits and str(hits[0].id).startswith("debian:")),
        "segments": len(index.manifest.segments),
    }
    print(json.dumps(row), flush=True)
    return row


def _reindex(index: Index, requested: str, queries: list[str]) -> dict:
    with common.PeakRss() as memory:
        started = time.perf_counter()
        manifest = index.reindex(requested)
        seconds = time.perf_counter() - started
    searcher = index.searcher(device="cpu")
    vectors = prepare_vectors(searcher.encoder.encode(queries), manifest.index.metric)
    _, exact = searcher.snapshot.exact_search(vectors, K)
    _, found = searcher.snapshot.search(vectors, K)
    row = {
        "factory": manifest.index.factory,
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(memory.peak / 2**30, 2),
        "search_params": manifest.index.search_params,
        "tuned_recall_own_vectors": (manifest.tuning or {}).get("recall"),
        "recall_at_10_debian_queries": round(recall_at_k(found, exact, K), 4),
        "index_file_bytes": manifest.segments[0].index_file_bytes,
    }
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    main()
