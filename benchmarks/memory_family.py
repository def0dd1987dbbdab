"""The memory family: what building, changing and searching an index holds in RAM.

Both run `python -m semsearch` in child processes sampled in /proc/PID/status: `bounded_memory`
steps at growing row counts; `beyond_ram` a `disk` index of noisy real vectors searched at
under 100 bytes a row (RssAnon and RssFile less a 1,000-row index's).

    python benchmarks/runner.py run beyond_ram --set rows=20000000   # the goal: hours, ~45 GB
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

# Searched as `semsearch serve` searches: FAISS's idle OpenMP threads sleep, and a lone query
# shares its lists among them (semsearch/cli/app.py); read when FAISS loads, and inherited.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from common import (  # noqa: E402
    corpus_texts,
    last_json_line,
    percentiles_ms,
    proc_status_kib,
    run_timed,
    unit_vectors,
    vector_column,
)

WORDS = np.array([f"w{number}" for number in range(5_000)])
CHUNK = 262_144
FILTERS = {"1_in_2": "bucket < 500", "1_in_20": "bucket < 50", "1_in_200": "bucket < 5"}
CGROUP_V1 = Path("/sys/fs/cgroup/memory")


def semsearch(arguments: list[str], sample: bool = False) -> dict:
    """A semsearch command in a child process: its seconds (and peak memory, MiB)."""
    ran = run_timed([sys.executable, "-m", "semsearch", *arguments], sample=sample, quiet=True)
    return {"seconds": round(ran["seconds"], 1), **{k: v for k, v in ran.items() if "peak" in k}}


def bounded_memory(context) -> Iterator[dict]:
    """One line per row count: each command's seconds and peaks, and the index's size."""
    p = context.params
    for rows in p["rows"] if isinstance(p["rows"], (list, tuple)) else [p["rows"]]:
        work = context.cache.root / "bounded" / f"r{rows}"  # the corpora are kept for reruns
        work.mkdir(parents=True, exist_ok=True)
        corpus, extra = work / "corpus.parquet", work / "extra.parquet"
        if not corpus.exists():
            write_random_corpus(corpus, rows, p["dimension"])
        added = max(1, rows // 100)
        if not extra.exists():  # new rows, and as many replacing old ones
            write_random_corpus(extra, added, p["dimension"], rows - added // 2, seed=1)
        indexes = work / "indexes"
        shutil.rmtree(indexes, ignore_errors=True)
        where = ["--index-dir", str(indexes)]
        figures = {"rows": rows, "dimension": p["dimension"], "index_type": p["index_type"]}
        figures["baseline"] = semsearch(["list", *where], True)  # the interpreter and imports
        options = ["--index-type", p["index_type"], "--target-recall", str(p["target_recall"])]
        columns = ["--vector-column", "emb", "--id-column", "key", "--name", "b"]
        steps = {
            "build": ["build", str(corpus), *columns, *options],
            "add": ["add", str(extra), "--index", "b"],
            "compact": ["compact", "b"],
            "reindex": ["reindex", "b", *options],
        }
        for step, arguments in steps.items():
            figures[step] = semsearch([*arguments, *where], True)
            if step != "add":
                manifest = json.loads((indexes / "b" / "manifest.json").read_text())
                size = sum(segment["index_file_bytes"] for segment in manifest["segments"])
                figures[step]["index_mib"] = round(size / 2**20, 1)
        print(json.dumps(figures), flush=True)
        yield figures


def write_random_corpus(path: Path, rows: int, dimension: int, first_id: int = 0, seed: int = 0):
    """`rows` random unit vectors with ids and short texts, written in chunks."""
    rng = np.random.default_rng(seed)
    vectors = pa.list_(pa.float32(), dimension)
    schema = pa.schema([("key", pa.int64()), ("text", pa.string()), ("emb", vectors)])
    temporary = path.with_name(f".{path.name}.tmp")
    with pq.ParquetWriter(temporary, schema) as writer:
        for start in range(0, rows, CHUNK):
            count = min(CHUNK, rows - start)
            emb = vector_column(unit_vectors(rng, count, dimension))
            texts = [" ".join(line) for line in WORDS[rng.integers(0, len(WORDS), (count, 6))]]
            keys = pa.array(np.arange(first_id + start, first_id + start + count))
            writer.write_table(pa.table([keys, pa.array(texts), emb], schema=schema))
    os.replace(temporary, path)


def beyond_ram(context) -> dict:
    """Synthesise, build, find the truth, then search in fresh processes (`search_figures`)."""
    p = context.params
    work = Path(p["work_dir"] or context.out_dir / "beyond_ram")
    work.mkdir(parents=True, exist_ok=True)
    if p["reuse_index"]:  # search the kept index, queries and truth again
        return {"reused_index": True, **search_figures(p, work)}
    base = base_vectors(context)
    corpus, empty = work / "corpus.parquet", work / "empty.parquet"
    started = time.perf_counter()
    reused = p["reuse_corpus"] and corpus.is_file()
    reused = reused and pq.read_metadata(corpus).num_rows == p["rows"]
    if not reused:  # the rows are seeded by position: a kept corpus of that size is the same
        write_synthetic(corpus, base, p["rows"], p["noise"])
    write_synthetic(empty, base, 1000, p["noise"])
    synthesis_s = None if reused else round(time.perf_counter() - started, 1)
    queries = synthesise(base, p["queries"], p["noise"], seed=10**12).astype(np.float32)
    np.save(work / "queries.npy", queries)
    built = build_synthetic(p, work, corpus, "beyond", p["index_type"])
    build_synthetic(p, work, empty, "empty", "flat")
    np.savez(work / "truth.npz", **ground_truth(work, "beyond", queries, p["k"]))
    figures = {
        "rows": p["rows"],
        "noise": p["noise"],
        "base_rows": len(base),
        "queries": p["queries"],
        "index_type": p["index_type"],
        "build": built,
        "synthesis_s": synthesis_s,
        **search_figures(p, work),
    }
    print(json.dumps(figures, indent=1))
    if not p["keep"]:
        corpus.unlink()
    return figures


def base_vectors(context) -> np.ndarray:
    """The real vectors the rows are made from: `base_npy`, or the default model's vectors of
    the first `base_rows` PyPI summaries (cached)."""
    p = context.params
    if p["base_npy"]:
        return np.load(p["base_npy"]).astype(np.float32)

    def encode() -> np.ndarray:
        from semsearch.models import BiEncoder

        texts = corpus_texts(context.data_dir, "pypi", p["base_rows"])
        vectors = BiEncoder.load("default", device="cpu").encode(texts)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    return context.cache.vectors(f"pypi-first{p['base_rows']}-default-unit", encode)


def synthesise(base: np.ndarray, rows: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = base[rng.integers(0, len(base), rows)]
    scale = np.float32(noise / np.sqrt(base.shape[1]))  # float32 throughout
    vectors = vectors + rng.standard_normal(vectors.shape, np.float32) * scale
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def write_synthetic(path: Path, base: np.ndarray, rows: int, noise: float) -> None:
    """`rows` synthetic vectors (float16) and each row's filter bucket, chunk by chunk."""
    chunks = (
        synthesise(base, min(CHUNK, rows - start), noise, seed=start + 1)
        for start in range(0, rows, CHUNK)
    )
    write_vectors(path, base.shape[1], chunks)


def write_vectors(path: Path, dimension: int, chunks: Iterable[np.ndarray]) -> None:
    """Vectors as float16 and each row's filter bucket (row number mod 1,000), chunk by chunk."""
    schema = pa.schema([("emb", pa.list_(pa.float16(), dimension)), ("bucket", pa.int32())])
    with pq.ParquetWriter(path, schema, compression="none") as writer:
        start = 0
        for chunk in chunks:
            emb = vector_column(chunk.astype(np.float16))
            bucket = pa.array(np.arange(start, start + len(chunk)) % 1000, pa.int32())
            writer.write_table(pa.table({"emb": emb, "bucket": bucket}, schema=schema))
            start += len(chunk)


def build_synthetic(p: dict, work: Path, corpus: Path, name: str, index_type: str) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    options = ["--vector-column", "emb", "--store-vectors", "fp16", "--index-type", index_type]
    options += ["--name", name, "--overwrite", "--target-recall", str(p["target_recall"])]
    seconds = semsearch(["build", str(corpus), *options, "--out-dir", str(work / "indexes")])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "seconds": seconds["seconds"],
        "peak_rss_mib": round(max(peak, before) / 1024, 1),
        "peak_rss_note": "largest child so far (ru_maxrss)" if peak == before else "",
    }


def ground_truth(work: Path, name: str, queries: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Exact top-k rows of each query, unfiltered and for each filter (bucket = id % 1000)."""
    from semsearch.ann.exact import exact_knn
    from semsearch.store.folders import find_index
    from semsearch.store.segment import Segment

    folder = find_index(name, work / "indexes")
    manifest = folder.manifest()
    segments = [Segment(folder.segment_dir(r.name), r) for r in manifest.segments]
    limits = {"all": 1000, **{share: int(where.split("<")[1]) for share, where in FILTERS.items()}}
    truth = {}
    for share, limit in limits.items():
        parts = (
            (ids[ids % 1000 < limit], vectors[ids % 1000 < limit])
            for segment in segments
            for ids, vectors in segment.iter_parts()
        )
        truth[share] = exact_knn(queries, parts, k, manifest.index.metric)[1]
    return truth


def search_figures(p: dict, work: Path) -> dict:
    """The searching figures of the `beyond` index against the `empty` one: a fresh process
    each, and one more under `memory_max`."""
    indexes = work / "indexes"
    needed = (work / "queries.npy", work / "truth.npz", *(indexes / "beyond", indexes / "empty"))
    if missing := [path for path in needed if not path.exists()]:
        raise SystemExit(f"error: {missing[0]} is missing: run without reuse_index first")
    manifest = json.loads((indexes / "beyond" / "manifest.json").read_text())
    rows = manifest["rows"]
    search = search_process(p, work, "beyond", with_truth=True)
    baseline = search_process(p, work, "empty", with_truth=False)
    figures = {
        "rows": rows,
        "search": search,
        "empty_index": baseline,
        "rss_anon_bytes_per_row": round((search["RssAnon"] - baseline["RssAnon"]) / rows, 1),
        "rss_file_bytes_per_row": round((search["RssFile"] - baseline["RssFile"]) / rows, 1),
        "disk_bytes": sum(f.stat().st_size for f in (indexes / "beyond").rglob("*") if f.is_file()),
    }
    if limit := p["memory_max"]:
        reason = limit_reason()
        limited = search_process(p, work, "beyond", True, limit) if reason is None else {}
        figures["memory_max"] = {"limit": limit, **({"not_run": reason} if reason else limited)}
    figures["index"] = manifest["index"]
    return figures


def search_process(p: dict, work: Path, name: str, with_truth: bool, limit: str = "") -> dict:
    """The searching figures from a fresh process (under the memory `limit`, if any)."""
    options = {"name": name, "work": str(work), "k": p["k"], "truth": with_truth}
    runner = Path(__file__).with_name("runner.py")
    command = [sys.executable, str(runner), "worker", "memory.search_worker", json.dumps(options)]
    if not limit:
        return last_json_line(run_timed(command, quiet=True)["stdout"])
    # Pages an earlier run left in the page cache are charged to the group that read them,
    # so the limit would not bind them: start from an empty cache where this process may.
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1")
        dropped = True
    except OSError:
        dropped = False
    if memory_max_reason() is None:
        scope = ["systemd-run", "--scope", "--quiet", "-p", f"MemoryMax={limit}"]
        output = run_timed([*scope, *command], quiet=True)["stdout"]
        figures = {"via": "systemd-run MemoryMax", **last_json_line(output)}
    else:
        figures = cgroup_v1_search(limit, command)
    return {"page_cache_dropped": dropped, **figures}


def cgroup_v1_search(limit: str, command: list[str]) -> dict:
    """The limited search in a cgroup-v1 memory group of its own (where systemd is not PID 1):
    memory.limit_in_bytes bounds its anonymous memory and page cache together, as MemoryMax
    does; the group's peak usage and how often it hit the limit come back with the figures."""
    from semsearch.ann.factory import parse_bytes

    group = CGROUP_V1 / f"semsearch-beyond-ram-{time.time_ns()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(parse_bytes(limit)))
        procs = group / "cgroup.procs"
        output = run_timed(command, quiet=True, preexec_fn=lambda: procs.write_text("0"))
        return {
            "via": "cgroup v1 memory.limit_in_bytes",
            "group_peak_bytes": int((group / "memory.max_usage_in_bytes").read_text()),
            "times_at_limit": int((group / "memory.failcnt").read_text()),
            **last_json_line(output["stdout"]),
        }
    finally:
        group.rmdir()


def search_worker(options: str) -> None:
    """In the searching process: queries, latencies, recall, then /proc/self/status."""
    import semsearch.ann.exact  # noqa: F401 - torch, as a rescoring search loads it: both sides
    from semsearch.ann.tune import recall_at_k
    from semsearch.search.searcher import Searcher
    from semsearch.store.folders import find_index

    o = json.loads(options)
    work, k = Path(o["work"]), o["k"]
    queries = np.load(work / "queries.npy")
    searcher = Searcher(find_index(o["name"], work / "indexes"))

    def recall(found: list[list[int]], truth: np.ndarray) -> float:
        return round(recall_at_k(found, [row.tolist() for row in truth], k), 4)

    found, latencies = [], []
    for rounds in range(2):  # the first round warms the page cache and hashes the parts
        latencies = []
        for query in queries:
            started = time.perf_counter()
            [hits] = searcher.search_vectors(query, k=k)
            latencies.append(time.perf_counter() - started)
            if rounds == 0:
                found.append([int(hit.id) for hit in hits] + [-1] * (k - len(hits)))
    figures = {**percentiles_ms(latencies), **memory_status()}  # after the unfiltered queries
    if o["truth"]:
        truth = dict(np.load(work / "truth.npz"))
        figures["recall_at_10"] = recall(found, truth["all"])
        for share, where in FILTERS.items():
            lines = searcher.search_vectors(queries, k=k, where=where)
            hits = [[int(hit.id) for hit in line] for line in lines]
            limit, rows = int(where.split("<")[1]), searcher.manifest.rows
            matches = rows // 1000 * limit + min(rows % 1000, limit)
            figures[f"filter_{share}"] = {
                "recall_at_10": recall(hits, truth[share]),
                "short_results": sum(len(line) < min(k, matches) for line in hits),
            }
        figures["after_filters"] = memory_status()  # DuckDB and the filters' exact indexes too
    print(json.dumps(figures))


def memory_status() -> dict:
    fields = proc_status_kib("self", ("RssAnon", "RssFile", "VmHWM"))
    return {name: fields[name] * 1024 for name in ("RssAnon", "RssFile", "VmHWM")}


def memory_max_reason() -> str | None:
    """None where `systemd-run --scope -p MemoryMax=` works here, else why not."""
    if shutil.which("systemd-run") is None:
        return "systemd-run is not installed"
    probe = subprocess.run(
        ["systemd-run", "--scope", "--quiet", "-p", "MemoryMax=4G", "true"],
        capture_output=True,
        text=True,
    )
    return None if probe.returncode == 0 else " ".join(probe.stderr.split())[:200]


def limit_reason() -> str | None:
    """None where a search can run under a memory limit here (systemd or cgroup v1)."""
    reason = memory_max_reason()
    if reason is None or os.access(CGROUP_V1, os.W_OK):
        return None
    return f"{reason}; and {CGROUP_V1} is not writable"
