"""The index family's measures: build and query, structures side by side, the living index.

Each takes the runner's `Context` (parameters, cache) and returns its JSON line(s):
- `build`: `build_index` over the first `limit` PyPI summaries (all by default; the largest
  real corpus, where `auto` leaves exact search for IVF): build time and its encoding share,
  peak RSS, folder size; warm single-query `Searcher.search` latency (encode + search +
  metadata); the IVF index's recall@10 against exact search over its own vectors.
- `tradeoff`: flat, IVF, HNSW and IVF-PQ on one index's vectors (held-out queries, the truth
  exact search over the rest): build time, size, tie-aware recall@10, one-query-per-call QPS
  at each nprobe / efSearch, and each structure's fastest setting at `target` recall.
- `living_scale`: on a built index, filters keeping ~50/5/0.5 % of the rows (recall against
  exact search over the kept rows, p50), `add` of Debian rows, and a reindex without the
  model; the index is rolled back afterwards, so the run repeats.
- `living`: N summaries plus `add` of M against a fresh build of N + M (flat: the same
  top-10; IVF/HNSW: recall within 0.01), delete, and filters on HNSW.
"""

from __future__ import annotations

import os

# Queries are measured as `semsearch query` and `serve` answer them: FAISS's idle OpenMP
# threads sleep instead of spinning (semsearch/cli/app.py); read when FAISS loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import psutil  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from common import (  # noqa: E402
    PeakRss,
    corpus_texts,
    environment,
    percentiles_ms,
    read_corpus,
    sample_rows,
)

from semsearch.ann.metrics import higher_is_better  # noqa: E402
from semsearch.ann.tune import recall_at_k, rescored_recall, tie_aware_recall  # noqa: E402
from semsearch.ann.vector_index import prepare_vectors  # noqa: E402
from semsearch.index import Index  # noqa: E402
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
        "environment": environment(),
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
    chosen = sample_rows(len(vectors), p["queries"], p["seed"])
    kept = np.ones(len(vectors), dtype=bool)
    kept[chosen] = False  # held out: no query finds itself
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
        "environment": environment(),
    }


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


def living_scale(context) -> dict:
    """Filters, add and reindex on a built index, rolled back to where it started."""
    p = context.params
    index = Index.open(p["index"], context.cache.index(p["index"]).parent)
    start = index.manifest
    debian = read_corpus(context.data_dir, "debian", columns=["package", "short_description"])
    debian = debian.take(pa.array(sample_rows(debian.num_rows, p["queries"] + p["add_rows"])))
    queries = debian.slice(0, p["queries"]).column("short_description").to_pylist()
    report = {
        "environment": environment(),
        "rows": start.rows,
        "factory": start.index.factory,
        "search_params": start.index.search_params,
        "build_seconds": start.build_seconds,
    }
    searcher = index.searcher(device="cpu")
    vectors = prepare_vectors(searcher.encoder.encode(queries), start.index.metric)
    shares = (0.5, 0.05, 0.005)
    if p["in_domain"]:
        report["filters"] = [_in_domain(searcher, p["queries"], share) for share in shares]
    else:
        report["filters"] = [filter_figures(searcher, queries, vectors, s) for s in (1.0, *shares)]
    if p["add_rows"]:
        report["add"] = _add(index, searcher, debian.slice(p["queries"]), p["add_rows"])
    if p["reindex"]:
        report["reindex"] = _reindex(index, p["reindex"], queries)
    index.rollback(start.generation)
    return report


def filter_figures(searcher: Searcher, queries: list[str], vectors: np.ndarray, share: float):
    """A filter keeping about `share` of the rows (a hash of the name, unrelated to the texts;
    1: none): tie-aware recall@10 against exact search over the kept rows, the fewest hits,
    p50 ms of the search alone and of a whole `Searcher.search` call."""
    where = f"hash(name) % 1000 < {round(share * 1000)}" if share < 1 else None
    snapshot = searcher.snapshot
    allowed = snapshot.where_mask(where) if where else snapshot.live  # cached before timing
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
    better = higher_is_better(snapshot.manifest.index.metric)
    recall = tie_aware_recall(found_scores, found_rows, exact_scores[:, K - 1], K, better)
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
    texts = searcher.metadata.column(searcher.manifest.text_column).take(pa.array(rows))
    texts = texts.to_pylist()
    vectors = prepare_vectors(searcher.encoder.encode(texts), searcher.manifest.index.metric)
    figures = filter_figures(searcher, texts, vectors, share)
    return {**figures, "queries": "indexed rows outside the filter"}


def _add(index: Index, searcher: Searcher, debian: pa.Table, rows: int) -> dict:
    names = [f"debian:{name}" for name in debian.column("package").to_pylist()]
    month = ["2026-11"] * debian.num_rows
    table = pa.table({"name": names, "month": month, "summary": debian["short_description"]})
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
    with PeakRss() as memory:
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


def living(context) -> dict:
    """Add = build for flat, IVF and HNSW; delete; filters on HNSW (`living_index`)."""
    p = context.params
    work = context.out_dir / "living"
    shutil.rmtree(work, ignore_errors=True)
    indexes = work / "indexes"
    indexes.mkdir(parents=True)
    table = read_corpus(context.data_dir, "pypi", columns=["name", "month", "summary"])
    table = table.filter(pc.invert(pc.is_null(table.column("summary"))))
    base_rows, add_rows = p["base_rows"], p["add_rows"]
    chosen = np.random.default_rng(0).choice(
        table.num_rows, base_rows + add_rows + p["queries"], replace=False
    )
    sample = table.take(pa.array(chosen)).rename_columns(["name", "month", "text"])
    base, added = sample.slice(0, base_rows), sample.slice(base_rows, add_rows)
    queries = sample.slice(base_rows + add_rows).column("text").to_pylist()
    paths = {}
    for label, part in (("base", base), ("added", added), ("all", pa.concat_tables([base, added]))):
        paths[label] = work / f"{label}.parquet"
        pq.write_table(part, paths[label])
    encoder = BiEncoder.load("default", device="cpu")
    report = {"environment": environment(), "types": {}}
    timings = {}
    for label in ("base", "all"):
        started = time.perf_counter()
        options = BuildOptions(
            corpus=paths[label],
            name=f"{label}-src",
            id_column="name",
            index="flat",
            out_dir=indexes,
            show_progress=False,
        )
        build_index(options, encoder)
        timings[f"build_{label}_s"] = round(time.perf_counter() - started, 2)
    truth = _ids(Searcher(Index.open("all-src", indexes).folder, encoder), queries)
    for kind in ("flat", "ivf", "hnsw"):
        grown = _copy(indexes, "base-src", f"base-{kind}")
        fresh = _copy(indexes, "all-src", f"all-{kind}")
        if kind != "flat":
            grown.reindex(kind)
            fresh.reindex(kind)
        started = time.perf_counter()
        result = grown.add(paths["added"], encoder=encoder)
        add_seconds = time.perf_counter() - started
        ours, theirs = Searcher(grown.folder, encoder), Searcher(fresh.folder, encoder)
        ours_ids, theirs_ids = _ids(ours, queries), _ids(theirs, queries)
        same_scores = np.abs(_scores(ours, queries) - _scores(theirs, queries)) < 1e-5
        row = {
            "added": result.added,
            "add_seconds": round(add_seconds, 2),
            "same_top10_as_fresh": float(np.mean([a == b for a, b in zip(ours_ids, theirs_ids)])),
            # Identical texts tie; where they straddle rank 10 either id is right.
            "same_top10_scores_as_fresh": float(np.mean(np.all(same_scores, axis=1))),
            "recall_added": round(recall_at_k(ours_ids, truth, K), 4),
            "recall_fresh": round(recall_at_k(theirs_ids, truth, K), 4),
            "search_params": grown.manifest.index.search_params,
            "segments": len(grown.manifest.segments),
        }
        row["recall_gap"] = round(row["recall_fresh"] - row["recall_added"], 4)
        report["types"][kind] = row
        print(kind, json.dumps(row))
    report["timings"] = timings
    report["delete"] = _delete(indexes, paths["all"], encoder, queries, p["delete_rows"])
    # filters keeping about 50 %, 5 % and 0.5 % of the rows (a hash of the name), on HNSW
    searcher = Index.open("base-hnsw", indexes).searcher(encoder=encoder)
    vectors = prepare_vectors(encoder.encode(queries), searcher.manifest.index.metric)
    report["filters"] = [filter_figures(searcher, queries, vectors, s) for s in (0.5, 0.05, 0.005)]
    return report


def _copy(indexes: Path, source: str, name: str) -> Index:
    shutil.rmtree(indexes / name, ignore_errors=True)
    shutil.copytree(indexes / source, indexes / name)
    return Index.open(name, indexes)


def _ids(searcher: Searcher, queries: list[str], **options) -> list[list]:
    return [[hit.id for hit in hits] for hits in searcher.search(queries, k=K, **options)]


def _scores(searcher: Searcher, queries: list[str]) -> np.ndarray:
    return np.array([[hit.score for hit in hits] for hits in searcher.search(queries, k=K)])


def _delete(indexes: Path, corpus: Path, encoder, queries: list[str], count: int) -> dict:
    index = _copy(indexes, "all-src", "delete-flat")
    names = pq.read_table(corpus, columns=["name"]).column("name").to_pylist()
    gone = set(np.random.default_rng(1).choice(names, count, replace=False).tolist())
    started = time.perf_counter()
    index.delete(ids=sorted(gone))
    seconds = time.perf_counter() - started
    found = _ids(Searcher(index.folder, encoder), queries)
    deep = Searcher(index.folder, encoder).search(queries[:20], k=1000)
    return {
        "deleted": count,
        "seconds": round(seconds, 2),
        "deleted_in_top10": sum(len(set(line) & gone) for line in found),
        "deleted_in_top1000_of_20_queries": sum(hit.id in gone for hits in deep for hit in hits),
    }
