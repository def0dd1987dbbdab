"""Building an index over all 841,708 PyPI summaries on CPU, then querying it.

Why: this is the largest real corpus here, and the one where `--index auto` leaves exact
search for IVF. The script measures what a user waits for and pays: build time (and how
much of it is encoding), peak memory, the index folder's size, warm per-query latency of
`Searcher.search` (encode + search + metadata), and, as a sanity check, the recall@10 of
the IVF index against exact search over the very same vectors.
"""

from __future__ import annotations

import os

# Queries are measured as `semsearch query` and `serve` answer them: FAISS's idle OpenMP
# threads sleep instead of spinning (semsearch/cli/app.py); read when FAISS loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import resource  # noqa: E402
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import psutil
from common import (
    DEFAULT_OUT_DIR,
    PeakRss,
    add_options,
    add_threads_option,
    args_dict,
    base_parser,
    corpus_head,
    corpus_texts,
    environment,
    percentiles_ms,
    record,
    sample_rows,
    set_threads,
)

from semsearch.ann.tune import recall_at_k, tie_aware_recall
from semsearch.ann.vector_index import prepare_vectors
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models import BiEncoder
from semsearch.search.searcher import Searcher
from semsearch.store.folders import IndexFolder

WARMUP = 20


def timed_build(options: BuildOptions) -> dict:
    """`build_index` with wall and CPU time, the same inside `encode`, and peak RSS."""
    encoder = BiEncoder.load(
        options.model,
        device=options.device,
        quantization=options.quantization,
        runtime=options.runtime,
    )
    encode, spent_encoding = encoder.encode, {"wall": 0.0, "cpu": 0.0}

    def counting_encode(*args, **kwargs) -> np.ndarray:
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = encode(*args, **kwargs)
        spent_encoding["wall"] += time.perf_counter() - wall
        spent_encoding["cpu"] += time.process_time() - cpu
        return vectors

    encoder.encode = counting_encode
    rss_before = psutil.Process().memory_info().rss
    with PeakRss() as rss:
        wall, cpu = time.perf_counter(), time.process_time()
        folder = build_index(options, encoder=encoder)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    manifest = folder.manifest()
    return {
        "folder": str(folder.path),
        "rows": manifest.rows,
        "index": manifest.index.factory,
        "search_params": manifest.index.search_params,
        "seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "encode_seconds": round(spent_encoding["wall"], 1),
        "encode_cpu_seconds": round(spent_encoding["cpu"], 1),
        "encode_texts_per_s": round(manifest.rows / spent_encoding["wall"], 1),
        "encode_texts_per_cpu_s": round(manifest.rows / spent_encoding["cpu"], 1),
        "rss_before_build_mib": round(rss_before / 2**20),
        "peak_rss_sampled_mib": round(rss.peak / 2**20),
        "ru_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "file_bytes": folder.size_bytes(),
    }


def sample_queries(data_dir: Path, source: str, count: int, seed: int) -> list[str]:
    """`count` distinct non-empty texts: Debian synopses (unseen) or PyPI summaries (indexed)."""
    column = "short_description" if source == "debian" else None
    texts = sorted(set(corpus_texts(data_dir, source, column=column)))
    return [texts[row] for row in sample_rows(len(texts), count, seed)]


def query_latency(searcher: Searcher, warmup: list[str], queries: list[str], k: int) -> dict:
    """Milliseconds per single-query `search` call over `queries`, after the `warmup` ones."""
    for query in warmup:
        searcher.search([query], k=k)
    times, cpu_times = [], []
    for query in queries:
        wall, cpu = time.perf_counter(), time.process_time()
        searcher.search([query], k=k)
        times.append(time.perf_counter() - wall)
        cpu_times.append(time.process_time() - cpu)
    return {
        "queries": len(times),
        "warmup": len(warmup),
        "k": k,
        **percentiles_ms(times, (50, 90, 99)),
        "mean_ms": round(1000 * float(np.mean(times)), 2),
        "cpu_p50_ms": round(1000 * float(np.median(cpu_times)), 2),
        "cpu_mean_ms": round(1000 * float(np.mean(cpu_times)), 2),
    }


def ivf_recall(searcher: Searcher, queries: list[str], k: int) -> dict:
    """recall@k of the IVF index against exact search over its own (stored) vectors."""
    snapshot, spec = searcher.snapshot, searcher.manifest.index
    if not snapshot.segments or any(
        segment.index.tunable_parameter() != "nprobe" for segment in snapshot.segments
    ):
        return {"skipped": f"{spec.factory} is not an IVF index: this check covers IVF only"}
    vectors = prepare_vectors(searcher.encoder.encode(queries), spec.metric)
    true_scores, truth = snapshot.exact_search(vectors, k)  # global rows, as search returns
    results = []
    default = spec.search_params["nprobe"]
    for nprobe in (default, default * 2, default * 4):
        scores, found = snapshot.search(vectors, k, {"nprobe": nprobe})
        same_rows = recall_at_k(found, truth, k)
        # Many PyPI summaries are identical, so ties at rank k swap rows without loss;
        # counting results that score at least the k-th exact score is tie-proof.
        tie_proof = tie_aware_recall(scores, found, true_scores[:, -1], k, True, 1e-6)
        results.append(
            {
                "nprobe": nprobe,
                "manifest_default": nprobe == default,
                "recall_same_rows": round(float(same_rows), 4),
                "recall_tie_aware": round(float(tie_proof), 4),
            }
        )
    return {
        "queries": len(queries),
        "k": k,
        "method": "IndexSnapshot.search vs exact_search over the stored vectors",
        "results": results,
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_options(
        parser,
        limit=(int, "build on the first N rows only"),
        index=("auto", "index type passed to BuildOptions"),
        quantize=(str, "int8: build (and query) with int8"),
        runtime=(str, "what encodes: torch, openvino, ... (default: the library's)"),
        index_dir=DEFAULT_OUT_DIR / "indexes",
        skip_build=(False, "reuse the index already built"),
        compile=(False, "query through Searcher(compile=True) (compiled on the warm-up)"),
        query_runtime=(
            "auto",
            "what encodes the queries (semsearch query --runtime; default auto)",
        ),
    )
    parser.add_argument("--query-source", choices=["debian", "pypi"], default="debian")
    add_options(parser, queries=1000, recall_queries=200, seed=0)
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    env = environment()
    name = "pypi" if args.limit is None else f"pypi-first{args.limit}"
    if args.index != "auto":
        name += f"-{args.index.lower()}"
    if args.quantize:
        name += f"-{args.quantize}"
    if args.runtime:
        name += f"-{args.runtime}"
    build = None
    if not args.skip_build:
        corpus = corpus_head(args.data_dir, "pypi", args.limit, args.out_dir / "tmp")
        options = BuildOptions(
            corpus=corpus,
            name=name,
            text_column="summary",
            id_column="name",
            index=args.index,
            device="cpu",
            out_dir=args.index_dir,
            quantization=args.quantize,
            overwrite=True,
        )
        if args.runtime:
            options = replace(options, runtime=args.runtime)
        build = timed_build(options)
        print(f"build: {build}", flush=True)

    started = time.perf_counter()
    folder = IndexFolder(args.index_dir / name)
    encoder = None
    if args.query_runtime != "torch":  # as `semsearch query` encodes by default
        from semsearch.models.query_loader import open_for_queries

        encoder = open_for_queries(folder.manifest().model, "cpu", args.query_runtime)
    searcher = Searcher(folder, encoder=encoder, device="cpu", compile=args.compile)
    open_seconds = time.perf_counter() - started
    sampled = sample_queries(args.data_dir, args.query_source, WARMUP + args.queries, args.seed)
    warmup, queries = sampled[:WARMUP], sampled[WARMUP:]
    latency = query_latency(searcher, warmup, queries, k=10)
    recall = ivf_recall(searcher, queries[: args.recall_queries], k=10)
    print(f"latency: {latency}")
    print(f"open {open_seconds:.1f} s; IVF recall vs exact: {recall}")
    payload = {
        "args": args_dict(args),
        "environment": env,
        "build": build,
        "manifest": searcher.manifest.to_dict(),
        "open_seconds": round(open_seconds, 2),
        "query_source": args.query_source,
        "latency": latency,
        "ivf_recall": recall,
    }
    record(args, "build_pypi", payload)


if __name__ == "__main__":
    main()
