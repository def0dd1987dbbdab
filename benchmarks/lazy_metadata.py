"""A searching process's memory a row apart from its FAISS index, hits' metadata latency and
`--where` time, on an index of your own random vectors with PyPI-like metadata.

Why: a searcher used to decode every part's metadata into one table at open. Each figure
is taken in a fresh child process, so the same index can be opened by another checkout of
semsearch (`--old-tree`, e.g. `git archive main semsearch | tar -x -C /tmp/old`) for the
before/after comparison. RssAnon is read after 1,000 queries (k=10, metadata attached),
minus the same process's RssAnon before it opened the index, minus the FAISS index's size.

    python benchmarks/lazy_metadata.py --rows 1000000 --old-tree /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import (
    DEFAULT_OUT_DIR,
    base_parser,
    environment,
    proc_status_kib,
    record,
    vector_column,
)

DIMENSION = 32
QUERIES = 1000
FILTERS = {"50 %": "year % 2 = 0", "5 %": "year % 20 = 0", "0.5 %": "year % 200 = 0"}
WORDS = "alpha beta gamma delta python library fast http client data tool async parser json web"


def write_corpus(path: Path, rows: int) -> None:
    """Random unit vectors and PyPI-like metadata, written in slices (bounded memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    words = np.array(WORDS.split())
    writer = None
    for start in range(0, rows, 100_000):
        count = min(100_000, rows - start)
        vectors = rng.normal(size=(count, DIMENSION)).astype(np.float32)
        summaries = [" ".join(rng.choice(words, n)) for n in rng.integers(4, 16, count)]
        table = pa.table(
            {
                "name": [f"pkg-{start + i}" for i in range(count)],
                "summary": summaries,
                "license": rng.choice(["MIT", "BSD", "Apache-2.0", "GPL"], count),
                "year": np.arange(start, start + count) % 1000 + 1500,
                "tags": [list(rng.choice(words, n)) for n in rng.integers(0, 4, count)],
                "emb": vector_column(vectors),
            }
        )
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    writer.close()


def child(index: Path) -> dict:
    """Run inside a fresh process: open, query, filter; what it measured."""
    from semsearch.search.searcher import Searcher
    from semsearch.store.folders import IndexFolder

    def anon() -> int:
        return proc_status_kib("self", ("RssAnon",)).get("RssAnon", 0) * 1024

    import faiss  # noqa: F401 - imported before the baseline, as the searcher needs it

    before = anon()
    started = time.perf_counter()
    searcher = Searcher(IndexFolder(index), vectors_only=True)
    opened = time.perf_counter() - started
    rows = searcher.manifest.rows
    queries = np.random.default_rng(1).normal(size=(QUERIES, DIMENSION)).astype(np.float32)
    latencies, metadata = [], []
    snapshot = searcher.snapshot
    for query in queries:
        t0 = time.perf_counter()
        scores, found = snapshot.search(query[None], 10)
        t1 = time.perf_counter()
        snapshot.hit_metadata.rows(found[0][found[0] >= 0])
        metadata.append(time.perf_counter() - t1)
        latencies.append(t1 - t0)
    after = anon()
    snapshot.where_mask("year > 0")  # DuckDB imported and connected, not timed
    where = {}
    for name, expression in FILTERS.items():
        t0 = time.perf_counter()
        matches = int(snapshot.where_mask(expression).sum())
        where[name] = {"matches": matches, "first_s": round(time.perf_counter() - t0, 3)}
    faiss_bytes = rows * DIMENSION * 4  # Flat
    return {
        "rows": rows,
        "open_s": round(opened, 2),
        "rss_anon_bytes_a_row_apart_from_faiss": round((after - before - faiss_bytes) / rows, 1),
        "hit_metadata_ms_p50": round(1000 * float(np.median(metadata)), 3),
        "hit_metadata_ms_p99": round(1000 * float(np.percentile(metadata, 99)), 3),
        "search_ms_p50": round(1000 * float(np.median(latencies)), 3),
        "where_after_queries_rss_anon_mb": round(anon() / 2**20, 1),
        "where": where,
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_OUT_DIR / "lazy_metadata")
    parser.add_argument("--old-tree", type=Path, default=None)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions

    args.work_dir.mkdir(parents=True, exist_ok=True)
    corpus = args.work_dir / f"corpus-{args.rows}.parquet"
    index = args.work_dir / "indexes" / f"rows-{args.rows}"
    if not corpus.exists():
        write_corpus(corpus, args.rows)
    if not index.exists():
        build_index(
            BuildOptions(
                corpus=corpus,
                out_dir=index.parent,
                name=index.name,
                vector_column="emb",
                model=None,
                index="flat",
                show_progress=False,
            )
        )
    figures = {
        "rows": args.rows,
        "dimension": DIMENSION,
        "index": "Flat",
        "queries": QUERIES,
        "command": "python benchmarks/lazy_metadata.py " + " ".join(sys.argv[1:]),
        "runs": {},
    }
    trees = {"this checkout": Path(__file__).resolve().parents[1]}
    if args.old_tree:
        trees["old tree"] = args.old_tree
    for name, tree in trees.items():
        environment_vars = {**os.environ, "PYTHONPATH": f"{tree}:{Path(__file__).parent}"}
        output = subprocess.run(
            [sys.executable, __file__, "--child", str(index)],
            check=True,
            capture_output=True,
            text=True,
            env=environment_vars,
        ).stdout
        figures["runs"][name] = json.loads(output.strip().splitlines()[-1])
        print(name, figures["runs"][name], flush=True)
    figures["environment"] = environment()
    record(args, "lazy_metadata", figures)


if __name__ == "__main__":
    main()
