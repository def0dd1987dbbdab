"""The recall family: what an index's tuning claims beside what queries it never saw get.

`held_out` (`held_out_recall`) indexes every `stride`-th PyPI summary of the first `first`
(150,000 of 600,000 by default) and queries it with `queries` other summaries, none
identical to an indexed one (ann-benchmarks keeps its queries apart the same way). For each
index type it records the tuned parameter, the recall@10 the tuning claims and the
tie-aware recall@10 on the held-out queries against exact search over the same stored
vectors, and whether `-k 1`'s hit is `-k 10`'s first. The vectors are the default model's,
read from `vectors_dir` (`part-NNN.npy`, 50,000 rows each, in the file's row order) where
those cover the rows, else encoded here. Each type is a `reindex` of one flat index of
those vectors (your own vectors: no model at build).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import read_corpus

from semsearch.ann.tune import rescored_recall
from semsearch.ann.vector_index import prepare_vectors
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.maintain import reindex
from semsearch.search.snapshot import IndexSnapshot, open_snapshot
from semsearch.store.folders import IndexFolder

K = 10
PART_ROWS = 50_000  # rows of each cached part-NNN.npy


def pypi_sample(context, p: dict, pool: int = 0) -> tuple[pa.Table, np.ndarray, pa.Table]:
    """(indexed rows: `name` = PyPI row number as id, `emb` = its vector; held-out query
    vectors; `pool` rows more to add later). Indexed: every `stride`-th row of the first
    `first` with a summary (at most `rows`); the pool: the rows half a stride after those;
    queries: `queries` other rows, distinct texts none of which is indexed or in the pool."""
    texts = read_corpus(context.data_dir, "pypi", p["first"], ["summary"]).column("summary")
    texts = texts.to_pylist()
    present = np.array([bool(text and text.strip()) for text in texts])
    indexed = np.arange(0, len(texts), p["stride"])
    indexed = indexed[present[indexed]][: p["rows"]]
    later = np.arange(p["stride"] // 2, len(texts), p["stride"])
    later = later[present[later]][:pool]
    seen = {texts[row] for row in np.concatenate([indexed, later])}
    others = np.setdiff1d(np.flatnonzero(present), np.concatenate([indexed, later]))
    queries, chosen = [], set()
    for row in np.random.default_rng(p["seed"]).permutation(others):
        if texts[row] not in seen and texts[row] not in chosen:
            queries.append(int(row))
            chosen.add(texts[row])
            if len(queries) == p["queries"]:
                break
    rows = np.concatenate([indexed, later, np.sort(queries)]).astype(np.int64)
    vectors = _vectors(context, p, texts, rows)
    tables = [
        pa.table(
            {
                "name": [f"r{row}" for row in rows[start:stop]],
                "emb": pa.array(list(vectors[start:stop]), pa.list_(pa.float32())),
            }
        )
        for start, stop in ((0, len(indexed)), (len(indexed), len(indexed) + len(later)))
    ]
    return tables[0], vectors[len(indexed) + len(later) :], tables[1]


def _vectors(context, p: dict, texts: list, rows: np.ndarray) -> np.ndarray:
    """The default model's vectors of `rows` (ascending within each half): the cached parts
    where they hold every row, else encoded (smoke runs without the cache)."""
    folder = Path(p["vectors_dir"]) if p["vectors_dir"] else None
    needed = sorted({int(row) // PART_ROWS for row in rows})
    paths = [folder / f"part-{part:03d}.npy" for part in needed] if folder else []
    if paths and all(path.is_file() for path in paths):
        parts = {part: np.load(path, mmap_mode="r") for part, path in zip(needed, paths)}
        return np.stack([parts[row // PART_ROWS][row % PART_ROWS] for row in rows]).astype(
            np.float32
        )
    from semsearch.models import BiEncoder

    print(f"encoding {len(rows)} summaries (no cached vectors for them)", flush=True)
    encoder = BiEncoder.load("default", device="cpu")
    return encoder.encode([texts[row] for row in rows])


def build_flat(context, table: pa.Table, name: str) -> IndexFolder:
    """A flat index of the sample's own vectors, the source every type is reindexed from."""
    work = context.out_dir / "recall"
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"{name}.parquet"
    pq.write_table(table, corpus)
    options = BuildOptions(
        corpus=corpus,
        name=name,
        out_dir=work / "indexes",
        vector_column="emb",
        model=None,
        id_column="name",
        index="flat",
        target_recall=None,
        lexical=None,
        overwrite=True,
        show_progress=False,
    )
    return build_index(options)


def measured_recall(snapshot: IndexSnapshot, queries: np.ndarray) -> dict:
    """Tie-aware recall@10 of the snapshot's search against exact search over its live rows
    (scores recomputed from the stored vectors: SQ and PQ scores are estimates), and how
    often `-k 1` returns `-k 10`'s first hit and the exact top-1."""
    metric = snapshot.manifest.index.metric
    exact_scores, _ = snapshot.exact_search(queries, K)
    _, found = snapshot.search(queries, K)
    _, first = snapshot.search(queries, 1)
    vectors = row_vectors(snapshot)
    recall = rescored_recall(found, queries, vectors, exact_scores[:, K - 1], metric)

    def as_good(rows: np.ndarray, scores: np.ndarray) -> float:
        """Share of first hits that score as the exact or `-k 10`'s (identical texts tie)."""
        mine = np.einsum("qd,qd->q", queries, vectors[rows])
        return round(float(np.mean(mine >= scores - 1e-6)), 4)

    k10_first = np.einsum("qd,qd->q", queries, vectors[found[:, 0]])
    return {
        "held_out_recall": round(recall, 4),
        "k1_as_good_as_k10": as_good(first[:, 0], k10_first),
        "k1_exact_top1": as_good(first[:, 0], exact_scores[:, 0]),
        "k10_exact_top1": as_good(found[:, 0], exact_scores[:, 0]),
    }


def row_vectors(snapshot: IndexSnapshot) -> np.ndarray:
    """Every stored row's prepared vector by global row (deleted rows too: never found)."""
    parts = [
        open_segment.segment.vectors_at(np.arange(open_segment.segment.record.rows))
        for open_segment in snapshot.segments
    ]
    return prepare_vectors(np.concatenate(parts), snapshot.manifest.index.metric)


def held_out(context):
    """`held_out_recall`: one line per index type; see the module docstring."""
    p = context.params
    table, queries, _ = pypi_sample(context, p)
    folder = build_flat(context, table, "held-out")
    print(f"{table.num_rows:,} indexed, {len(queries):,} held-out queries", flush=True)
    for index_type in p["types"].split(","):
        started = time.perf_counter()
        manifest = reindex(folder, index_type, target_recall=p["target"])
        seconds = time.perf_counter() - started
        snapshot = open_snapshot(folder)
        queries_prepared = prepare_vectors(queries, manifest.index.metric)
        tuning = manifest.tuning or {}
        line = {
            "type": index_type,
            "factory": manifest.index.factory,
            "rows": manifest.rows,
            "queries": len(queries),
            "target": p["target"],
            "search_params": manifest.index.search_params,
            "claimed_recall": tuning.get("recall"),
            "tuned_on": len(getattr(manifest.segments[0], "held_out", ())) or tuning.get("queries"),
            "reindex_seconds": round(seconds, 1),
            **measured_recall(snapshot, queries_prepared),
        }
        print(json.dumps(line), flush=True)
        yield line
    shutil.rmtree(folder.path, ignore_errors=True)
