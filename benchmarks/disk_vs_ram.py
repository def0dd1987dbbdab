"""`beyond_ram.py --from-index FOLDER`: a real corpus's vectors in a `disk` index beside
today's in-RAM IVF-SQfp16, measured the same way, so a user sees the trade-off.

Both indexes are built from the same vectors (the stored vectors of FOLDER, e.g. the
841,708 PyPI summaries, as `--vector-column emb`, stored as fp16 in both), so they share
ids and ground truth. The queries are Debian package synopses (unseen by the index)
encoded with FOLDER's model. Recall@10 is given both by ids and tie-aware (a hit counts
when its exact score reaches the k-th exact score less 1e-5: many PyPI summaries are
identical, so equal vectors may swap places without loss). Memory as in beyond_ram.py:
the searching process's RssAnon and RssFile after the queries, minus a 1,000-row index's.

    python benchmarks/beyond_ram.py --from-index indexes/pypi --work-dir /tmp/disk_vs_ram
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from beyond_ram import CHUNK, build, ground_truth, recall, search_process, write_vectors
from common import corpus_texts

TIE_TOLERANCE = 1e-5


def stored_vectors(folder: Path) -> np.ndarray:
    """All stored vectors of an index folder, float32, in row order."""
    from semsearch.store.folders import IndexFolder
    from semsearch.store.segment import Segment

    index = IndexFolder(folder)
    manifest = index.manifest()
    segments = [Segment(index.segment_dir(r.name), r) for r in manifest.segments]
    return np.concatenate([v.astype(np.float32) for s in segments for _, v in s.iter_parts()])


def write_chunked(path: Path, vectors: np.ndarray) -> None:
    chunks = (vectors[start : start + CHUNK] for start in range(0, len(vectors), CHUNK))
    write_vectors(path, vectors.shape[1], chunks)


def debian_queries(args, model: str) -> np.ndarray:
    from semsearch.models import BiEncoder

    texts = sorted(set(corpus_texts(args.data_dir, "debian", column="short_description")))
    chosen = np.random.default_rng(0).choice(len(texts), size=args.queries, replace=False)
    return BiEncoder.load(model, device="cpu").encode([texts[row] for row in chosen])


def tie_aware(
    found: np.ndarray, queries: np.ndarray, vectors: np.ndarray, kth: np.ndarray
) -> float:
    """Share of the k slots holding a row whose exact score reaches the k-th exact score."""
    hits = 0
    for query, rows, bar in zip(queries, found, kth):
        rows = rows[rows >= 0]
        hits += int(np.sum(vectors[rows] @ query >= bar - TIE_TOLERANCE))
    return round(hits / found.size, 4)


def side_by_side(args) -> dict:
    from semsearch.store.folders import IndexFolder

    source = IndexFolder(args.from_index)
    manifest = source.manifest()
    vectors = stored_vectors(args.from_index)
    corpus, empty = args.work_dir / "corpus.parquet", args.work_dir / "empty.parquet"
    write_chunked(corpus, vectors)
    write_chunked(empty, vectors[:1000])
    vectors = vectors.astype(np.float16).astype(np.float32)  # as both indexes store them
    queries = debian_queries(args, manifest.model.name).astype(np.float32)
    queries_file = args.work_dir / "queries.npy"
    np.save(queries_file, queries)
    figures: dict = {
        "mode": "from_index",
        "source": str(args.from_index),
        "rows": len(vectors),
        "queries": args.queries,
        "query_source": "Debian synopses",
    }
    built = {kind: build(args, corpus, kind, kind) for kind in ("disk", "ivfsq")}
    build(args, empty, "empty", "flat")
    truth = ground_truth(args, "disk", queries, args.k)
    np.savez(args.work_dir / "truth.npz", **truth)
    kth = np.einsum("qd,qd->q", vectors[truth["all"][:, -1]], queries)  # k-th exact score
    baseline = search_process(args, "empty", queries_file, None, False)
    figures["empty_index"] = baseline
    for kind in ("disk", "ivfsq"):
        found_file = args.work_dir / f"found-{kind}.npy"
        started = time.perf_counter()
        search = search_process(
            args, kind, queries_file, args.work_dir / "truth.npz", False, found_file
        )
        found = np.load(found_file)
        figures[kind] = {
            "build": built[kind],
            "search": search,
            "search_wall_s": round(time.perf_counter() - started, 1),
            "recall_at_10_by_ids": recall(found.tolist(), truth["all"], args.k),
            "recall_at_10_tie_aware": tie_aware(found, queries, vectors, kth),
            "rss_anon_bytes_per_row": round(
                (search["RssAnon"] - baseline["RssAnon"]) / len(vectors), 1
            ),
            "rss_file_bytes_per_row": round(
                (search["RssFile"] - baseline["RssFile"]) / len(vectors), 1
            ),
            "disk_bytes": sum(
                f.stat().st_size
                for f in (args.work_dir / "indexes" / kind).rglob("*")
                if f.is_file()
            ),
            "index": json.loads((args.work_dir / "indexes" / kind / "manifest.json").read_text())[
                "index"
            ],
        }
    print(figures)
    if not args.keep:
        corpus.unlink()
    return figures
