"""The index family: build and query an index, and structures side by side.

`build` times `build_index`, warm query latency and IVF recall@10; `tradeoff` compares flat,
IVF, HNSW and IVF-PQ on one index's vectors (recall@10, QPS, each one's fastest at `target`),
queried with rows taken out of the structures whose text no indexed row repeats.
"""

from __future__ import annotations

import os

# Queries are measured as `semsearch query` and `serve` answer them: FAISS's idle OpenMP
# threads sleep instead of spinning (semsearch/cli/app.py); read when FAISS loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import re  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import psutil  # noqa: E402
from common import (  # noqa: E402
    PeakRss,
    corpus_texts,
    percentiles_ms,
    sample_rows,
)

from semsearch.ann.tune import recall_at_k, rescored_recall, tie_aware_recall  # noqa: E402
from semsearch.ann.vector_index import prepare_vectors  # noqa: E402
from semsearch.ingest.build import build_index  # noqa: E402
from semsearch.ingest.build_options import BuildOptions  # noqa: E402
from semsearch.models import BiEncoder  # noqa: E402
from semsearch.search.searcher import Searcher  # noqa: E402
from semsearch.store.folders import IndexFolder  # noqa: E402

K = 10
WARMUP = 20
NPROBES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
EF_SEARCHES = (16, 32, 64, 128, 256, 512)
# label -> FAISS factory string; IVF types sweep nprobe, HNSW types efSearch
STRUCTURES = {
    "flat": "Flat",
    "ivf1024": "IVF1024,Flat",
    "ivf4096": "IVF4096,Flat",
    "hnsw16": "HNSW16,Flat",
    "hnsw32": "HNSW32,Flat",
    "ivfpq48": "IVF4096,PQ48",
    "ivfpq96": "IVF4096,PQ96",
}
# as semsearch.ann.vector_index's TRAIN_POINTS_PER_CENTROID: k-means time grows with the sample
TRAIN_POINTS_PER_LIST = 64


def index_name(limit: int | None, index: str, quantize: str | None, runtime: str | None) -> str:
    """The cache's name for a PyPI index: `pypi[-firstN][-type][-int8][-runtime]`."""
    name = "pypi" if limit is None else f"pypi-first{limit}"
    name += "" if index == "auto" else f"-{index.lower()}"
    return name + "".join(f"-{part}" for part in (quantize, runtime) if part)


def build_named(cache, name: str) -> dict:
    """Build the PyPI index a cache name describes (`index_name`'s form), timed."""
    found = re.fullmatch(r"pypi(?:-first(\d+))?(?:-(\w+))?", name)
    if found is None:
        raise SystemExit(f"{cache.indexes / name} is missing and its name says no PyPI build")
    limit = int(found[1]) if found[1] else None
    options = BuildOptions(
        corpus=cache.corpus_file("pypi", limit),
        name=name,
        text_column="summary",
        id_column="name",
        index=found[2] or "auto",
        device="cpu",
        out_dir=cache.indexes,
        overwrite=True,
    )
    return timed_build(options)


def timed_build(options: BuildOptions) -> dict:
    """`build_index` with wall and CPU time, the same inside `encode`, and peak RSS."""
    encoder = BiEncoder.load(
        options.model,
        device=options.device,
        quantization=options.quantization,
        runtime=options.runtime,
    )
    encode, spent = encoder.encode, {"wall": 0.0, "cpu": 0.0}

    def counting_encode(*args, **kwargs) -> np.ndarray:
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = encode(*args, **kwargs)
        spent["wall"] += time.perf_counter() - wall
        spent["cpu"] += time.process_time() - cpu
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
        "encode_seconds": round(spent["wall"], 1),
        "encode_cpu_seconds": round(spent["cpu"], 1),
        "encode_texts_per_s": round(manifest.rows / spent["wall"], 1),
        "encode_texts_per_cpu_s": round(manifest.rows / spent["cpu"], 1),
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


def build(context) -> dict:
    """Build (unless `skip_build`), then warm query latency and IVF recall against exact."""
    p = context.params
    name = index_name(p["limit"], p["index"], p["quantize"], p["runtime"])
    built = None
    if not p["skip_build"]:
        options = BuildOptions(
            corpus=context.cache.corpus_file("pypi", p["limit"]),
            name=name,
            text_column="summary",
            id_column="name",
            index=p["index"],
            device="cpu",
            out_dir=context.cache.indexes,
            quantization=p["quantize"],
            overwrite=True,
        )
        built = timed_build(replace(options, runtime=p["runtime"]) if p["runtime"] else options)
        print(f"build: {built}", flush=True)
    started = time.perf_counter()
    folder = IndexFolder(context.cache.index(name))
    encoder = None
    if p["query_runtime"] != "torch":  # as `semsearch query` encodes by default
        from semsearch.models.query_loader import open_for_queries

        encoder = open_for_queries(folder.manifest().model, "cpu", p["query_runtime"])
    searcher = Searcher(folder, encoder=encoder, device="cpu", compile=p["compile"])
    open_seconds = time.perf_counter() - started
    count = WARMUP + p["queries"]
    sampled = sample_queries(context.data_dir, p["query_source"], count, p["seed"])
    queries = sampled[WARMUP:]
    latency = query_latency(searcher, sampled[:WARMUP], queries)
    recall = ivf_recall(searcher, queries[: p["recall_queries"]])
    print(f"latency: {latency}\nopen {open_seconds:.1f} s; IVF recall vs exact: {recall}")
    return {
        "build": built,
        "manifest": searcher.manifest.to_dict(),
        "open_seconds": round(open_seconds, 2),
        "query_source": p["query_source"],
        "latency": latency,
        "ivf_recall": recall,
    }


def query_latency(searcher: Searcher, warmup: list[str], queries: list[str]) -> dict:
    """Milliseconds per single-query `search` call over `queries`, after the `warmup` ones."""
    for query in warmup:
        searcher.search([query], k=K)
    times, cpu_times = [], []
    for query in queries:
        wall, cpu = time.perf_counter(), time.process_time()
        searcher.search([query], k=K)
        times.append(time.perf_counter() - wall)
        cpu_times.append(time.process_time() - cpu)
    return {
        "queries": len(times),
        "warmup": len(warmup),
        "k": K,
        **percentiles_ms(times, (50, 90, 99)),
        "mean_ms": round(1000 * float(np.mean(times)), 2),
        "cpu_p50_ms": round(1000 * float(np.median(cpu_times)), 2),
        "cpu_mean_ms": round(1000 * float(np.mean(cpu_times)), 2),
    }


def ivf_recall(searcher: Searcher, queries: list[str]) -> dict:
    """recall@10 of the IVF index against exact search over its own (stored) vectors, at the
    manifest's nprobe and 2 and 4 times it."""
    snapshot, spec = searcher.snapshot, searcher.manifest.index
    if not snapshot.segments or any(
        segment.index.tunable_parameter() != "nprobe" for segment in snapshot.segments
    ):
        return {"skipped": f"{spec.factory} is not an IVF index: this check covers IVF only"}
    vectors = prepare_vectors(searcher.encoder.encode(queries), spec.metric)
    true_scores, truth = snapshot.exact_search(vectors, K)  # global rows, as search returns
    default, results = spec.search_params["nprobe"], []
    for nprobe in (default, default * 2, default * 4):
        scores, found = snapshot.search(vectors, K, {"nprobe": nprobe})
        # Many PyPI summaries are identical, so ties at rank k swap rows without loss;
        # counting results that score at least the k-th exact score is tie-proof.
        tie_proof = tie_aware_recall(scores, found, true_scores[:, -1], K, True, 1e-6)
        results.append(
            {
                "nprobe": nprobe,
                "manifest_default": nprobe == default,
                "recall_same_rows": round(float(recall_at_k(found, truth, K)), 4),
                "recall_tie_aware": round(float(tie_proof), 4),
            }
        )
    method = "IndexSnapshot.search vs exact_search over the stored vectors"
    return {"queries": len(queries), "k": K, "method": method, "results": results}


def tradeoff(context) -> dict:
    """Each structure of `types` built on one index's vectors and swept at search."""
    import faiss

    from semsearch.ann.exact import ExactSearch
    from semsearch.training.vectors import index_vectors

    p = context.params
    types = p["types"].split(",")
    if unknown := [name for name in types if name not in STRUCTURES]:
        raise SystemExit(f"unknown types {unknown}: choose from {', '.join(STRUCTURES)}")
    folder = IndexFolder(context.cache.index(p["index"]))
    manifest = folder.manifest()
    metric = manifest.index.metric
    key = f"{folder.name}-generation{manifest.generation}-{metric}"
    vectors = context.cache.vectors(key, lambda: prepare_vectors(index_vectors(folder), metric))
    unique = unique_rows(vectors)
    chosen = np.sort(unique[sample_rows(len(unique), p["queries"], p["seed"])])
    kept = np.ones(len(vectors), dtype=bool)
    kept[chosen] = False  # held out, and no indexed text is the same: queries it never saw
    database, queries = np.ascontiguousarray(vectors[kept]), np.ascontiguousarray(vectors[chosen])
    print(f"{len(database):,} vectors of {folder.name} ({metric}), {len(queries):,} queries")
    inner = metric in ("cosine", "dot")  # the vectors are prepared for inner product
    exact_metric = "dot" if inner else "l2"
    kth_exact = ExactSearch(database, exact_metric).search(queries, K)[0][:, -1]
    faiss_metric = faiss.METRIC_INNER_PRODUCT if inner else faiss.METRIC_L2

    def measure(label: str) -> dict:
        index, seconds = build_structure(STRUCTURES[label], database, faiss_metric, p)
        size = int(faiss.serialize_index(index.faiss).size)
        print(f"{label}: built in {seconds:.1f} s, {size / 2**20:.0f} MiB", flush=True)
        parameter = {"IVF": "nprobe", "HNS": "efSearch"}.get(STRUCTURES[label][:3])
        values = {"nprobe": NPROBES, "efSearch": EF_SEARCHES}.get(parameter, (None,))
        if parameter == "nprobe" and p["nprobes"]:  # `nprobes=1,4,16` reads as a tuple
            values = tuple(p["nprobes"]) if isinstance(p["nprobes"], tuple) else (p["nprobes"],)
        points = []
        for value in values:
            if parameter == "nprobe" and value > index.parameter_ceiling():
                continue
            params = {parameter: value} if value is not None else {}
            # tie-aware: PyPI has many identical summaries, and PQ's own scores are estimates
            found = index.search(queries, K, params)[1]
            recall = rescored_recall(found, queries, database, kth_exact, exact_metric)
            point = {"parameter": parameter, "value": value, "recall_at_10": round(recall, 4)}
            point.update(single_query_rate(index, params, queries, p["min_seconds"]))
            print(f"  {parameter}={value}: {point}", flush=True)
            points.append(point)
            if point["recall_at_10"] >= 0.999:
                break
        meeting = [point for point in points if point["recall_at_10"] >= p["target"]]
        best = max(meeting, key=lambda point: point["qps"], default=None)
        print(label, round(seconds, 1), "s", best, flush=True)
        return {
            "label": label,
            "factory": STRUCTURES[label],
            "build_seconds": round(seconds, 1),
            "index_bytes": size,
            "points": points,
            "best": best,  # the fastest setting at the target recall
        }

    results = [measure(label) for label in types]
    flat = next((r for r in results if r["label"] == "flat"), None) or measure("flat")
    return {
        "index": folder.name,
        "database_rows": len(database),
        "queries": len(queries),
        "k": K,
        "exact_qps": flat["points"][0]["qps"],
        "results": results,
    }


def unique_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows whose vector no other row shares (an identical text would be the query's own
    row under another name): one random projection tells identical vectors apart."""
    keys = vectors.astype(np.float64) @ np.random.default_rng(0).normal(size=vectors.shape[1])
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return np.flatnonzero(counts[inverse] == 1)


def build_structure(factory: str, database: np.ndarray, metric: int, p: dict):
    """The bare FAISS structure filled with `database` (row numbers as ids; training on
    TRAIN_POINTS_PER_LIST per list), wrapped for per-call search parameters, and its seconds."""
    import faiss

    from semsearch.ann.vector_index import VectorIndex

    index = faiss.index_factory(database.shape[1], factory, metric)
    if p["ef_construction"] and factory.startswith("HNSW"):
        faiss.downcast_index(index).hnsw.efConstruction = p["ef_construction"]
    started = time.perf_counter()
    if not index.is_trained:
        lists = faiss.extract_index_ivf(index).nlist
        size = min(len(database), max(TRAIN_POINTS_PER_LIST * lists, 65_536))
        rows = np.random.default_rng(p["seed"]).choice(len(database), size=size, replace=False)
        index.train(database[np.sort(rows)])
    for start in range(0, len(database), 65_536):
        index.add(database[start : start + 65_536])
    metric_name = "dot" if metric == faiss.METRIC_INNER_PRODUCT else "l2"
    return VectorIndex(index, metric_name), time.perf_counter() - started


def single_query_rate(index, params: dict, queries: np.ndarray, min_seconds: float) -> dict:
    """Queries/s and latency percentiles, one query per call, for at least `min_seconds`."""
    for query in queries[:10]:
        index.search(query[None, :], K, params)
    times, started = [], time.perf_counter()
    while time.perf_counter() - started < min_seconds or len(times) < 20:
        for query in queries:
            tick = time.perf_counter()
            index.search(query[None, :], K, params)
            times.append(time.perf_counter() - tick)
            if time.perf_counter() - started >= min_seconds and len(times) >= 20:
                break
    return {
        "qps": round(len(times) / (time.perf_counter() - started), 1),
        **percentiles_ms(times, digits=3),
        "timed_queries": len(times),
    }
