"""Beyond RAM: N synthetic 384-d rows in a `disk` index, searched at under 100 bytes a row.

    python benchmarks/beyond_ram.py --rows 20000000            # the goal (hours, ~45 GB disk)
    python benchmarks/beyond_ram.py --rows 200000 --queries 1000
    python benchmarks/beyond_ram.py --rows 20000 --base-rows 300 --queries 50   # smoke

The vectors: a base of real vectors (`--base-npy FILE.npy`, or the stored vectors of an
index built here from the first `--base-rows` PyPI summaries with the default model), and
each synthetic row a random base vector plus isotropic Gaussian noise of norm `--noise`
(per coordinate noise/sqrt(d)), renormalised: at the default 0.35 a row keeps cosine ~0.94
with its base vector and ~0.89 with its siblings, about what real near-duplicates summaries
score. They are written as Parquet (`emb`, a fixed-size list of float16; `bucket` = row %
1000, so `bucket < 500 / 50 / 5` keeps 50 % / 5 % / 0.5 %), built with `semsearch build
--vector-column emb --index-type disk --store-vectors fp16`, and searched in a separate
process, which reports its RssAnon and RssFile (/proc/self/status) after the queries, minus
the same process over a 1,000-row index; recall@10 against exact search
(`semsearch.ann.exact`) over the stored vectors on held-out queries; single-query p50/p99
warm; and the same for the three filters. With `--memory-max 4G` the searching process
also runs under `systemd-run --scope -p MemoryMax=4G` where systemd can do that.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

# Searched as `semsearch serve` searches: FAISS's idle OpenMP threads sleep, and a lone query
# shares its lists among them (semsearch/cli/app.py); read when FAISS loads, and inherited.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from common import (  # noqa: E402
    add_options,
    add_results_option,
    add_threads_option,
    base_parser,
    corpus_texts,
    last_json_line,
    percentiles_ms,
    proc_status_kib,
    record,
    run_timed,
    set_threads,
    vector_column,
)

HERE = Path(__file__).resolve().parent
FILTERS = {"1_in_2": "bucket < 500", "1_in_20": "bucket < 50", "1_in_200": "bucket < 5"}
CHUNK = 262_144
CGROUP_V1 = Path("/sys/fs/cgroup/memory")


def base_vectors(args) -> np.ndarray:
    """The real vectors the rows are made from: a .npy, or an index of PyPI summaries."""
    if args.base_npy is not None:
        return np.load(args.base_npy).astype(np.float32)
    summaries = args.work_dir / "base.parquet"
    texts = corpus_texts(args.data_dir, "pypi", args.base_rows)
    pq.write_table(pa.table({"summary": texts}), summaries)
    options = "--text-column summary --index-type flat --no-lexical --target-recall 0"
    semsearch(["build", str(summaries), *options.split(), "--name", "base", "--overwrite"], args)
    from semsearch.training.vectors import load_vectors

    return load_vectors(index="base", index_dir=args.work_dir / "indexes")


def synthesise(base: np.ndarray, rows: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = base[rng.integers(0, len(base), rows)]
    scale = np.float32(noise / np.sqrt(base.shape[1]))  # float32 throughout
    vectors = vectors + rng.standard_normal(vectors.shape, np.float32) * scale
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def write_corpus(path: Path, base: np.ndarray, rows: int, noise: float) -> None:
    """`rows` synthetic vectors (float16) with their filter bucket, chunk by chunk."""
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


def semsearch(arguments: list[str], args) -> float:
    """Run the CLI on the work folder's indexes; its wall seconds."""
    arguments = [*arguments, "--out-dir", str(args.work_dir / "indexes")]
    return run_timed([sys.executable, "-m", "semsearch", *arguments])["seconds"]


def build(args, corpus: Path, name: str, index_type: str) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    options = ["--vector-column", "emb", "--store-vectors", "fp16", "--index-type", index_type]
    options += ["--name", name, "--overwrite", "--target-recall", str(args.target_recall)]
    seconds = semsearch(["build", str(corpus), *options], args)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "seconds": round(seconds, 1),
        "peak_rss_mib": round(max(peak, before) / 1024, 1),
        "peak_rss_note": "largest child so far (ru_maxrss)" if peak == before else "",
    }


def ground_truth(args, name: str, queries: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Exact top-k rows of each query, unfiltered and for each filter (bucket = id % 1000)."""
    from semsearch.ann.exact import exact_knn
    from semsearch.store.folders import find_index
    from semsearch.store.segment import Segment

    folder = find_index(name, args.work_dir / "indexes")
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


def search_process(
    args, name: str, queries: Path, truth: Path | None, limited: bool, found: Path | None = None
) -> dict:
    """The searching figures, from a fresh process (under the memory limit where `limited`);
    with `found`, the unfiltered hits' ids are saved there too."""
    command = [sys.executable, str(Path(__file__).resolve()), "--search-worker", name]
    command += ["--work-dir", str(args.work_dir), "--queries-file", str(queries)]
    command += ["--k", str(args.k)]
    command += ["--truth-file", str(truth)] if truth else []
    command += ["--found-file", str(found)] if found else []
    if not limited:
        return last_json_line(run_timed(command, quiet=True)["stdout"])
    # Pages an earlier run left in the page cache are charged to the group that read them,
    # so the limit would not bind them: start from an empty cache where this process may.
    dropped = drop_page_cache()
    if memory_max_reason() is None:
        limit = ["systemd-run", "--scope", "--quiet", "-p", f"MemoryMax={args.memory_max}"]
        output = run_timed([*limit, *command], quiet=True)["stdout"]
        return {
            "via": "systemd-run MemoryMax",
            "page_cache_dropped": dropped,
            **last_json_line(output),
        }
    return {"page_cache_dropped": dropped, **cgroup_v1_search(args, command)}


def drop_page_cache() -> bool:
    """Write back and drop the kernel's clean page cache (root only); whether it was."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1")
    except OSError:
        return False
    return True


def cgroup_v1_search(args, command: list[str]) -> dict:
    """The limited search in a cgroup-v1 memory group of its own (where systemd is not PID 1):
    memory.limit_in_bytes bounds its anonymous memory and page cache together, as MemoryMax
    does; the group's peak usage and how often it hit the limit come back with the figures."""
    from semsearch.ann.factory import parse_bytes

    group = CGROUP_V1 / f"semsearch-beyond-ram-{time.time_ns()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(parse_bytes(args.memory_max)))
        procs = group / "cgroup.procs"
        output = run_timed(command, quiet=True, preexec_fn=lambda: procs.write_text("0"))
        figures = last_json_line(output["stdout"])
        usage = int((group / "memory.max_usage_in_bytes").read_text())
        failures = int((group / "memory.failcnt").read_text())
        return {
            "via": "cgroup v1 memory.limit_in_bytes",
            "group_peak_bytes": usage,
            "times_at_limit": failures,
            **figures,
        }
    finally:
        group.rmdir()


def search_worker(args) -> None:
    """Run in the searching process: queries, latencies, recall, then /proc/self/status."""
    import semsearch.ann.exact  # noqa: F401 - torch, as a rescoring search loads it: both sides
    from semsearch.search.searcher import Searcher
    from semsearch.store.folders import find_index

    queries = np.load(args.queries_file)
    truth = dict(np.load(args.truth_file)) if args.truth_file else None
    searcher = Searcher(find_index(args.search_worker, args.work_dir / "indexes"))
    figures: dict = {}
    found, latencies = [], []
    for rounds in range(2):  # the first round warms the page cache and hashes the parts
        latencies = []
        for query in queries:
            started = time.perf_counter()
            [hits] = searcher.search_vectors(query, k=args.k)
            latencies.append(time.perf_counter() - started)
            if rounds == 0:
                found.append([int(hit.id) for hit in hits] + [-1] * (args.k - len(hits)))
    if args.found_file:
        np.save(args.found_file, np.array(found, dtype=np.int64))
    figures.update(percentiles_ms(latencies))
    figures.update(memory_status())  # after the 1,000 unfiltered queries: the goal's figure
    if truth is not None:
        figures["recall_at_10"] = recall(found, truth["all"], args.k)
        for share, where in FILTERS.items():
            hits = [
                [int(hit.id) for hit in line]
                for line in searcher.search_vectors(queries, k=args.k, where=where)
            ]
            limit, rows = int(where.split("<")[1]), searcher.manifest.rows
            matches = rows // 1000 * limit + min(rows % 1000, limit)
            figures[f"filter_{share}"] = {
                "recall_at_10": recall(hits, truth[share], args.k),
                "short_results": sum(len(line) < min(args.k, matches) for line in hits),
            }
        figures["after_filters"] = memory_status()  # DuckDB and the filters' exact indexes too
    print(json.dumps(figures))


def recall(found: list[list[int]], truth: np.ndarray, k: int) -> float:
    from semsearch.ann.tune import recall_at_k

    return round(recall_at_k(found, [row.tolist() for row in truth], k), 4)


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


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_results_option(parser)
    add_threads_option(parser)
    add_options(
        parser,
        rows=20_000_000,
        queries=(1000, "held-out queries"),
        k=10,
        noise=(0.35, "norm of the Gaussian noise added to a base vector (default 0.35)"),
        base_npy=(Path, "real vectors [n, d] to start from"),
        base_rows=(30_000, "PyPI summaries encoded for the base when no --base-npy"),
        index_type="disk",
        # 0.96: tuning measures on corpus rows; the held-out queries came out ~0.005 lower at 200k
        target_recall=0.96,
        memory_max=(str, "also search under this MemoryMax"),
        work_dir=Path("/tmp/beyond_ram"),
        keep=(False, "keep the corpus and indexes"),
        reuse_corpus=(
            False,
            "use the work dir's corpus.parquet when it has --rows rows (same seeds)",
        ),
        reuse_index=(
            False,
            "search the work dir's kept index, queries and truth again (after a "
            "change to searching): no corpus, build or ground truth",
        ),
    )
    hidden = {"search_worker": str, "queries_file": Path, "truth_file": Path, "found_file": Path}
    add_options(parser, hidden=True, **hidden)
    args = parser.parse_args()
    set_threads(args.threads)
    if args.search_worker:
        search_worker(args)
        return
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if args.reuse_index:
        figures = {"reused_index": True, **search_figures(args)}
        print(json.dumps(figures, indent=1))
        record(args, "beyond_ram", figures)
        return
    base = base_vectors(args)
    corpus, empty = args.work_dir / "corpus.parquet", args.work_dir / "empty.parquet"
    started = time.perf_counter()
    reused = (
        args.reuse_corpus and corpus.is_file() and pq.read_metadata(corpus).num_rows == args.rows
    )
    if not reused:  # the rows are seeded by position: a kept corpus of that size is the same
        write_corpus(corpus, base, args.rows, args.noise)
    write_corpus(empty, base, 1000, args.noise)
    synthesis_s = None if reused else round(time.perf_counter() - started, 1)
    queries = synthesise(base, args.queries, args.noise, seed=10**12).astype(np.float32)
    np.save(args.work_dir / "queries.npy", queries)
    built = build(args, corpus, "beyond", args.index_type)
    build(args, empty, "empty", "flat")
    truth = ground_truth(args, "beyond", queries, args.k)
    np.savez(args.work_dir / "truth.npz", **truth)
    figures = {
        "rows": args.rows,
        "noise": args.noise,
        "base_rows": len(base),
        "queries": args.queries,
        "index_type": args.index_type,
        "build": built,
        "synthesis_s": synthesis_s,
        **search_figures(args),
    }
    print(json.dumps(figures, indent=1))
    record(args, "beyond_ram", figures)
    if not args.keep:
        corpus.unlink()


def search_figures(args) -> dict:
    """The searching figures of the work dir's `beyond` index against its `empty` one: a
    fresh process each, and one more under --memory-max."""
    queries, truth = args.work_dir / "queries.npy", args.work_dir / "truth.npz"
    missing = [
        p
        for p in (
            queries,
            truth,
            args.work_dir / "indexes" / "beyond" / "manifest.json",
            args.work_dir / "indexes" / "empty" / "manifest.json",
        )
        if not p.is_file()
    ]
    if missing:
        raise SystemExit(f"error: {missing[0]} is missing: run without --reuse-index first")
    manifest = json.loads((args.work_dir / "indexes" / "beyond" / "manifest.json").read_text())
    rows = manifest["rows"]
    search = search_process(args, "beyond", queries, truth, False)
    baseline = search_process(args, "empty", queries, None, False)
    figures = {
        "rows": rows,
        "search": search,
        "empty_index": baseline,
        "rss_anon_bytes_per_row": round((search["RssAnon"] - baseline["RssAnon"]) / rows, 1),
        "rss_file_bytes_per_row": round((search["RssFile"] - baseline["RssFile"]) / rows, 1),
        "disk_bytes": sum(
            f.stat().st_size
            for f in (args.work_dir / "indexes" / "beyond").rglob("*")
            if f.is_file()
        ),
    }
    if args.memory_max:
        reason = limit_reason()
        figures["memory_max"] = (
            {"limit": args.memory_max, "not_run": reason}
            if reason
            else {"limit": args.memory_max, **search_process(args, "beyond", queries, truth, True)}
        )
    figures["index"] = manifest["index"]
    return figures


if __name__ == "__main__":
    main()
