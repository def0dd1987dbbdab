"""The filtered family: search speed and recall against the share of rows a filter keeps.

`selectivity` (`filtered_search`) builds an index of the default model's PyPI summary
vectors (`vectors_dir`'s `part-NNN.npy`, 50,000 rows each in row order, else encoded once
into the runner's cache) for each index type,
with a column of random integers that filters keep 0.01 % to 50 % of, and searches held-out
summaries' vectors (rows after the indexed ones: never a query's own row) with each filter:
p50/p95 ms of `IndexSnapshot.search` (the vector search and the filter, where the
selectivity acts), recall@10 against exact search over the kept rows, and p50 against the
unfiltered query's. Goals (issue 48): recall 1.000 and p50 within 2x unfiltered, at every
share.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from semsearch.ann.metrics import higher_is_better, prepare_vectors
from semsearch.ann.tune import tie_aware_recall
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.search.searcher import Searcher
from semsearch.store.folders import find_index

K = 10
BUCKETS = 1_000_000  # filters keep `bucket < share x BUCKETS`: 1 in a million at the finest


def load_vectors(context, rows: int) -> np.ndarray:
    """The default model's vectors of the first `rows` PyPI summaries: from the parts in
    `vectors_dir` where they hold that many, else encoded here once (the runner's cache)."""
    folder = Path(context.params["vectors_dir"])
    available = sum(len(np.load(path, mmap_mode="r")) for path in folder.glob("part-*.npy"))
    if available >= rows:
        return _from_parts(folder, rows)

    def encode() -> np.ndarray:
        from common import corpus_texts

        from semsearch.models import BiEncoder

        texts = corpus_texts(context.data_dir, "pypi", rows)
        vectors = BiEncoder.load("default", device="cpu").encode(texts)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    print(f"{folder} holds {available} vectors, fewer than {rows}: encoding them", flush=True)
    return context.cache.vectors(f"pypi-first{rows}-default-unit", encode)


def _from_parts(folder: Path, rows: int) -> np.ndarray:
    """The first `rows` vectors of the parts, in row order."""
    parts, total = [], 0
    for path in sorted(folder.glob("part-*.npy")):
        part = np.load(path, mmap_mode="r")
        parts.append(np.asarray(part[: rows - total], np.float32))
        total += len(parts[-1])
        if total >= rows:
            break
    return np.concatenate(parts)


def _corpus(vectors: np.ndarray, path: Path, seed: int) -> Path:
    """A Parquet of the vectors and a random `bucket` column (unrelated to the texts)."""
    rows, dimension = vectors.shape
    flat = pa.array(vectors.reshape(-1))
    offsets = pa.array(np.arange(0, rows * dimension + 1, dimension, dtype=np.int32))
    bucket = np.random.default_rng(seed).integers(0, BUCKETS, rows)
    table = pa.table({"emb": pa.ListArray.from_arrays(offsets, flat), "bucket": bucket})
    pq.write_table(table, path, row_group_size=50_000)
    return path


def _figures(searcher: Searcher, queries: np.ndarray, share: float | None) -> dict:
    """p50/p95 ms and recall@10 of single-query searches with the filter keeping `share`,
    on one FAISS thread as `semsearch serve` searches (OpenMP's threads for one query cost
    more than they save, and on a busy machine its barriers wait whole time slices)."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        return _timed(searcher, queries, share)
    finally:
        faiss.omp_set_num_threads(threads)


def _timed(searcher: Searcher, queries: np.ndarray, share: float | None) -> dict:
    snapshot = searcher.snapshot
    where = None if share is None else f"bucket < {round(share * BUCKETS)}"
    started = time.perf_counter()
    allowed = snapshot.where_mask(where) if where else snapshot.live  # then cached
    mask_ms = 1000 * (time.perf_counter() - started)
    exact_scores, _ = snapshot.exact_search(queries, K, allowed)
    snapshot.search(queries[:1], K, None, where)  # a kept-rows index is built once, first
    latencies, found_scores, found_rows = [], [], []
    for position in range(len(queries)):
        started = time.perf_counter()
        scores, rows = snapshot.search(queries[position : position + 1], K, None, where)
        latencies.append(1000 * (time.perf_counter() - started))
        found_scores.append(scores[0])
        found_rows.append(rows[0])
    better = higher_is_better(snapshot.manifest.index.metric)
    found_rows, found_scores = np.array(found_rows), np.array(found_scores)
    kth = exact_scores[:, min(K, int(allowed.sum())) - 1] if allowed.any() else None
    wanted = min(K, int(allowed.sum()))
    recall = tie_aware_recall(found_scores, found_rows, kth, wanted, better) if wanted else 1.0
    return {
        "share": share if share is not None else 1.0,
        "matches": int(allowed.sum()),
        "recall": round(recall, 4),
        "p50_ms": round(float(np.percentile(latencies, 50)), 3),
        "p95_ms": round(float(np.percentile(latencies, 95)), 3),
        "first_mask_ms": round(mask_ms, 1),
    }


def _strategy(searcher: Searcher, query: np.ndarray, share: float) -> str:
    """How the planner searches a filter keeping `share` (semsearch.search.filter_plan)."""
    where = f"bucket < {round(share * BUCKETS)}"
    found = searcher.search_vectors(query[None, :], k=K, where=where, explain=True)
    return found.explain["filter"]["strategy"]


def selectivity(context) -> list[dict]:
    """`filtered_search`: one line per index type, a row per filter share."""
    p = context.params
    vectors = load_vectors(context, p["rows"] + p["queries"])
    base, held_out = vectors[: p["rows"]], vectors[p["rows"] :]
    work = context.out_dir / "filtered_search"
    work.mkdir(parents=True, exist_ok=True)
    corpus = _corpus(base, work / f"pypi-{p['rows']}.parquet", p["seed"])
    lines = []
    for kind in p["types"].split(","):
        started = time.perf_counter()
        build_index(
            BuildOptions(
                corpus=corpus,
                name=f"filtered-{kind}",
                text_column=None,
                vector_column="emb",
                model=None,
                index=kind,
                out_dir=work / "indexes",
                overwrite=True,
                show_progress=False,
                lexical=None,
            )
        )
        build_s = time.perf_counter() - started
        searcher = Searcher(find_index(f"filtered-{kind}", work / "indexes"), vectors_only=True)
        queries = prepare_vectors(held_out, searcher.manifest.index.metric)
        unfiltered = _figures(searcher, queries, None)
        rows = []
        for share in p["shares"]:
            row = _figures(searcher, queries, share)
            row["strategy"] = _strategy(searcher, held_out[0], share)
            row["p50_vs_unfiltered"] = round(row["p50_ms"] / max(unfiltered["p50_ms"], 1e-6), 2)
            print(json.dumps({"type": kind, **row}), flush=True)
            rows.append(row)
        lines.append(
            {
                "type": kind,
                "factory": searcher.manifest.index.factory,
                "search_params": searcher.manifest.index.search_params,
                "rows": p["rows"],
                "queries": p["queries"],
                "build_seconds": round(build_s, 1),
                "unfiltered": unfiltered,
                "filters": rows,
                "min_recall": min(row["recall"] for row in rows),
                "min_recall_vs_unfiltered": round(
                    min(row["recall"] for row in rows) - unfiltered["recall"], 4
                ),
                "max_p50_vs_unfiltered": max(row["p50_vs_unfiltered"] for row in rows),
            }
        )
    return lines
