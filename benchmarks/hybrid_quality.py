"""Hybrid search measured: dense, lexical (BM25) and hybrid quality, and each mode's latency.

Quality: nDCG@10 and recall@100 on DBPedia and Debian short -> long descriptions (alpha tuned
on 2 folds); latency: single-query `Searcher.search` p50 per mode, interleaved query by query.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from common import (
    add_options,
    args_dict,
    base_parser,
    environment,
    read_corpus,
    record,
    set_threads,
)
from index_family import sample_queries

from semsearch.evaluation.beir import RetrievalData, read_beir
from semsearch.evaluation.hybrid import (
    cross_validated_convex,
    exact_modes,
    mode_metrics,
)
from semsearch.models import BiEncoder
from semsearch.search.hybrid import Fusion
from semsearch.store.manifest import LexicalSpec

MODES_SHOWN = (
    "dense",
    "lexical",
    "hybrid adaptive 0.5",
    "hybrid rrf k=60",
    "hybrid convex 0.5",
    "hybrid convex tuned",
)
WARMUP = 20


class CachedEncoder:
    """The default encoder, its vectors kept in `folder` by a hash of the texts (reruns of
    the benchmark then skip minutes of encoding)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder, self.encoder = folder, BiEncoder.load("default", device="cpu")

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:20]
        path = self.folder / f"{key}.npy" if self.folder else None
        if path is not None and path.is_file():
            return np.load(path)
        vectors = self.encoder.encode(texts, batch_size=batch_size)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
        return vectors


def debian_task(data_dir: Path, rows: int) -> RetrievalData:
    """Query: a package's synopsis; its one relevant document: its long description."""
    table = read_corpus(data_dir, "debian", rows)
    long_texts = table.column("long_description").to_pylist()
    short_texts = table.column("short_description").to_pylist()
    ids = [str(row) for row in range(rows)]
    return RetrievalData(
        dict(zip(ids, (t or "" for t in long_texts))),
        dict(zip(ids, short_texts)),
        {i: {i: 1} for i in ids},
    )


def quality(name: str, data: RetrievalData, encoder: CachedEncoder) -> list[dict]:
    """Every mode's figures on one task, BM25 at its default settings."""
    sides = exact_modes(encoder, data, batch_size=32)
    modes = mode_metrics(sides, data.qrels, Fusion())
    for other in (Fusion("rrf"), Fusion("convex")):
        hybrid = mode_metrics(sides, data.qrels, other).items()
        modes.update({mode: m for mode, m in hybrid if mode.startswith("hybrid")})
    modes["hybrid convex tuned"], folds = cross_validated_convex(sides, data.qrels)
    row = {"task": name, "bm25": "default", "lexical_spec": asdict(LexicalSpec())}
    row["alpha_folds"], row["queries"] = folds, int(modes["dense"]["queries"])
    row["modes"] = {
        mode: {"ndcg@10": round(m["ndcg@10"], 4), "recall@100": round(m["recall@100"], 4)}
        for mode, m in modes.items()
    }
    return [row]


def latency(index: Path, data_dir: Path, queries: int, k: int) -> dict:
    """p50/p90 ms of single-query searches in each mode on `index` (a lexical part added first
    if it has none, timed)."""
    from semsearch.ingest.maintain import set_lexical
    from semsearch.search.searcher import Searcher
    from semsearch.store.folders import IndexFolder

    folder = IndexFolder(index)
    facts: dict = {"index": str(index), "rows": folder.manifest().rows}
    if folder.manifest().lexical is None:
        started = time.perf_counter()
        set_lexical(folder, LexicalSpec())
        facts["lexical_build_seconds"] = round(time.perf_counter() - started, 1)
    manifest = folder.manifest()
    facts["lexical_bytes"] = sum(
        path.stat().st_size
        for record in manifest.segments
        for path in (folder.segment_dir(record.name) / record.lexical_dir).iterdir()
    )
    started = time.perf_counter()
    searcher = Searcher(folder, device="cpu")
    facts["open_seconds"] = round(time.perf_counter() - started, 2)
    texts = sample_queries(data_dir, "debian", WARMUP + queries, seed=0)
    runs = {
        "dense": ("dense", None),
        "lexical": ("lexical", None),
        "hybrid adaptive": ("hybrid", Fusion()),
        "hybrid rrf": ("hybrid", Fusion("rrf")),
        "hybrid convex": ("hybrid", Fusion("convex")),
    }
    started = time.perf_counter()
    searcher.search(texts[:1], k=k, mode="lexical")
    facts["lexical_first_load_seconds"] = round(time.perf_counter() - started, 2)
    for text in texts[:WARMUP]:  # every query length's first run (kernel set-up) untimed
        for mode, fusion in runs.values():
            searcher.search([text], k=k, mode=mode, fusion=fusion)
    times: dict[str, list[float]] = {label: [] for label in runs}
    for number, text in enumerate(texts[WARMUP:]):  # modes interleaved, in turn first
        labels = list(runs)[number % len(runs) :] + list(runs)[: number % len(runs)]
        for label in labels:
            mode, fusion = runs[label]
            started = time.perf_counter()
            searcher.search([text], k=k, mode=mode, fusion=fusion)
            times[label].append((time.perf_counter() - started) * 1000)
    facts["modes"] = {}
    for label, measured in times.items():
        p50, p90 = np.percentile(measured, [50, 90])
        facts["modes"][label] = {
            "p50_ms": round(p50, 2),
            "p90_ms": round(p90, 2),
            "mean_ms": round(float(np.mean(measured)), 2),
        }
        print(f"latency {label}: p50 {p50:.2f} ms, p90 {p90:.2f} ms", flush=True)
    dense = facts["modes"]["dense"]["p50_ms"]
    for label in ("hybrid adaptive", "hybrid rrf", "hybrid convex"):
        facts["modes"][label]["vs_dense_p50"] = round(facts["modes"][label]["p50_ms"] / dense, 2)
    facts["queries"], facts["k"], facts["query_source"] = queries, k, "debian synopses"
    return facts


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_options(
        parser,
        debian_rows=5_000,
        vectors_cache=(Path, "keep the encoded vectors here between runs"),
        latency_index=(Path, "an index of the PyPI summaries to time each mode on"),
        latency_queries=500,
        skip_quality=False,
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        choices=("dbpedia", "debian"),
        default=["dbpedia", "debian"],
        help="quality tasks (default both)",
    )
    add_options(parser, threads=int)
    args = parser.parse_args()
    set_threads(args.threads)
    figures = {"benchmark": "hybrid_quality", "args": args_dict(args), "environment": environment()}
    started = time.perf_counter()
    if not args.skip_quality:
        encoder = CachedEncoder(args.vectors_cache)
        rows = []
        if "dbpedia" in args.tasks:
            dbpedia = read_beir(args.data_dir / "beir_dbpedia-entity-mini")
            rows += quality("dbpedia-mini", dbpedia, encoder)
        if "debian" in args.tasks:
            debian = debian_task(args.data_dir, args.debian_rows)
            rows += quality(f"debian-{args.debian_rows}", debian, encoder)
        figures["quality"] = rows
        for row in rows:
            shown = {mode: m["ndcg@10"] for mode, m in row["modes"].items() if mode in MODES_SHOWN}
            print(row["task"], row["bm25"], "nDCG@10:", shown, flush=True)
    if args.latency_index is not None:
        figures["latency"] = latency(args.latency_index, args.data_dir, args.latency_queries, 10)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    record(args, "hybrid_quality", figures)


if __name__ == "__main__":
    main()
