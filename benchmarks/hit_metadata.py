"""Turning search hits' row numbers into metadata dicts: one table slice per hit, `MetadataRows`
over the whole table in memory (each row's record batch found by `searchsorted`, its cells
read directly) and `MetadataParts`, what a searcher uses (the hits' parts only, read from
their memory-mapped Arrow copies: no table in memory).

Why: a server does this for about ten rows per query while holding the GIL, so its cost
is paid in every request's latency. Both ways read the same opened snapshot's metadata and
must give the same dicts (checked); the figure is one thread's CPU per 10 hits.

    python benchmarks/hit_metadata.py --index-dir benchmarks/out/indexes --index pypi-fp16
"""

from __future__ import annotations

import sys
import time

import numpy as np
from common import (
    add_index_options,
    base_parser,
    environment,
    markdown_table,
    record,
)

QUERIES = 2000
HITS = 10


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_index_options(parser)
    args = parser.parse_args()
    from semsearch.index.snapshot import open_snapshot
    from semsearch.index.store import IndexFolder

    snapshot = open_snapshot(IndexFolder(args.index_dir / args.index))
    from semsearch.index.metadata_rows import MetadataRows

    parts = snapshot.hit_metadata
    table = snapshot.metadata.select(parts.names)  # read whole, for the ways that need it
    rows_of = MetadataRows(table)
    rng = np.random.default_rng(0)
    queries = [np.sort(rng.choice(table.num_rows, HITS, replace=False)) for _ in range(QUERIES)]

    def sliced(rows: np.ndarray) -> list[dict]:
        return [table.slice(int(row), 1).to_pylist()[0] for row in rows]

    assert all(sliced(rows) == rows_of.rows(rows) == parts.rows(rows) for rows in queries[:50])
    figures = {"benchmark": "hit_metadata", "index": args.index, "rows": table.num_rows,
               "columns": len(parts.names), "queries": QUERIES, "hits": HITS, "ms_per_10_hits": {},
              "command": "python benchmarks/hit_metadata.py " + " ".join(sys.argv[1:])}  # fmt: skip
    ways = (("table slice per hit", sliced), ("MetadataRows", rows_of.rows),
            ("MetadataParts (mapped parts)", parts.rows))  # fmt: skip
    for name, way in ways:
        started = time.thread_time()
        for rows in queries:
            way(rows)
        figures["ms_per_10_hits"][name] = round(1000 * (time.thread_time() - started) / QUERIES, 4)
    figures["environment"] = environment()
    record(args, "hit_metadata", figures)
    print(
        markdown_table(
            ["way", "ms per 10 hits (1 thread)"],
            [[k, v] for k, v in figures["ms_per_10_hits"].items()],
        )
    )


if __name__ == "__main__":
    main()
