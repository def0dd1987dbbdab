"""`semsearch serve` under concurrent load, side by side with txtai's API on the same vectors.

Per concurrency: queries/s, p50/p95/p99 and errors of STS-B queries (client: `http_load.py`);
`--soak-minutes` then adds rows every 30 s under load and tracks errors and RSS growth.

    python benchmarks/serve_load.py --index pypi --index-dir benchmarks/out/indexes
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
from common import (
    REPO_ROOT,
    add_index_options,
    base_parser,
    environment,
    record,
    reference_model_path,
)
from http_load import load, target_for
from txtai_peer import MODEL_ENV, build_txtai_index

API_KEY = "serve-load-benchmark"
HEADERS = {"X-API-Key": API_KEY}  # semsearch wants its key; txtai ignores the header


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 600) -> None:
    """Return once `url` answers 200 and warm; stop the server and the benchmark if it never does."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(
                f"the server exited: {process.stderr.read() if process.stderr else ''}"
            )
        try:
            answer = httpx.get(url, timeout=2, headers={"X-API-Key": API_KEY})
            if answer.status_code == 200 and answer.json().get("warm", True):
                return  # measured once the bf16 kernels are compiled, as before
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit(f"{url} did not answer in {timeout_s:.0f} s")


def start_semsearch(
    index: str, index_dir: Path, extra: list[str] = ()
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    options = ["--index-dir", str(index_dir), "--port", str(port)]
    options += ["--device", "cpu", "--api-key", API_KEY]
    process = subprocess.Popen(
        [sys.executable, "-m", "semsearch", "serve", index, *options, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_healthy(f"http://127.0.0.1:{port}/ready", process)
    return process, f"http://127.0.0.1:{port}"


def start_txtai(txtai_index: Path, out_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    config = out_dir / "txtai_api.yml"
    # `path` loads the saved index; the `embeddings` key is what turns its routes on.
    config.write_text(f"path: {txtai_index}\nembeddings:\n", encoding="utf-8")
    env = {
        **os.environ,
        "CONFIG": str(config),
        "ALLOW_RESOLVE_TRANSFORM": "True",
        "PYTHONPATH": str(REPO_ROOT / "benchmarks"),
        MODEL_ENV: str(reference_model_path()),
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "txtai.api:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_healthy(f"http://127.0.0.1:{port}/search?query=warm+up&limit=1", process)
    return process, f"http://127.0.0.1:{port}"


def semsearch_target(k: int):
    return target_for("/search", "q", {"k": k})


def txtai_target(k: int):
    return target_for("/search", "query", {"limit": k})


SOAK_WARMUP_S = 60


async def soak(
    base: str, index: str, queries: list[str], minutes: float, rows: list[dict], pid: int
) -> dict:
    """Concurrency-8 load for `minutes` while 1,000 rows are upserted every 30 s.

    RSS is taken at start, after a minute of queries alone (the baseline: encoder workers'
    buffers, FAISS' per-thread scratch and the allocator's arenas are made by the first
    queries and then reused), before each add and at the end; a leak shows as a slope
    across the adds, a one-off cost as a step before them.
    """
    process = psutil.Process(pid)

    def rss_mib() -> int:
        return round(process.memory_info().rss / 2**20)

    rss_cold = rss_mib()
    await load(base, semsearch_target(10), queries, 8, 10**9, SOAK_WARMUP_S, HEADERS)
    rss_start = rss_mib()
    stop_at = time.monotonic() + 60 * minutes
    added, add_errors, series = 0, [], [rss_start]

    async def adder() -> None:
        nonlocal added
        async with httpx.AsyncClient(timeout=300, headers={"X-API-Key": API_KEY}) as client:
            while time.monotonic() + 30 < stop_at:
                await asyncio.sleep(30)
                series.append(rss_mib())
                batch = rows[added : added + 1000]
                response = await client.post(
                    f"{base}/indexes/{index}/documents", json={"rows": batch}
                )
                if response.status_code != 200:
                    add_errors.append(response.text[:200])
                added += len(batch)

    load_task = load(base, semsearch_target(10), queries, 8, 10**9, 60 * minutes, HEADERS)
    result, _ = await asyncio.gather(load_task, adder())
    rss_end = rss_mib()
    series.append(rss_end)
    return {
        **result,
        "rows_added": added,
        "add_errors": add_errors,
        "rss_cold_mib": rss_cold,
        "rss_start_mib": rss_start,
        "rss_end_mib": rss_end,
        "rss_growth": round(rss_end / rss_start - 1, 4),
        "rss_growth_from_cold": round(rss_end / rss_cold - 1, 4),
        "rss_series_mib": series,
        "warmup_s": SOAK_WARMUP_S,
    }


def server_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the server process and its children so far."""
    process = psutil.Process(pid)
    times = process.cpu_times()
    return (
        times.user
        + times.system
        + sum(c.cpu_times().user + c.cpu_times().system for c in process.children(recursive=True))
    )


def level_key(levels: dict, level: int, server: str) -> str:
    """The key "32", or "32#2" for the second time a level is run for `server` (levels may repeat, to
    see whether one server process gets slower with time)."""
    repeat = 1
    while server in levels.get(key := str(level) if repeat == 1 else f"{level}#{repeat}", {}):
        repeat += 1
    return key


def machine_busy_seconds() -> float:
    """CPU seconds all processes of the machine have spent so far (not idle, not iowait)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def stsb_queries(data_dir: Path, count: int, seed: int = 0) -> list[str]:
    with gzip.open(data_dir / "stsb" / "stsb_test.tsv.gz", "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()[1:]
    sentences = sorted({part for line in lines for part in line.split("\t")[:2] if part.strip()})
    random.Random(seed).shuffle(sentences)
    return sentences[:count]


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_index_options(parser)
    parser.add_argument("--concurrency", default="1,8,32,128")
    parser.add_argument("--requests", type=int, default=2000, help="requests per concurrency level")
    parser.add_argument("--max-seconds", type=float, default=120, help="cap per concurrency level")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--soak-minutes", type=float, default=0, help="0: no soak")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument(
        "--serve-args", default="", help="more options for semsearch serve, e.g. '--max-batch 16'"
    )
    args = parser.parse_args()
    queries = stsb_queries(args.data_dir, 2000)
    levels = [int(level) for level in args.concurrency.split(",")]
    figures: dict = {
        "benchmark": "serve_load",
        "index": args.index,
        "k": args.k,
        "levels": {},
        "client": "http_load (asyncio, keep-alive HTTP/1.1)",
        "command": "python benchmarks/serve_load.py " + " ".join(sys.argv[1:]),
    }
    for name in ("semsearch", "txtai"):
        if name == "txtai" and args.no_peer:
            continue
        if name == "semsearch":
            process, base = start_semsearch(args.index, args.index_dir, args.serve_args.split())
            target = semsearch_target(args.k)
        else:
            txtai_index = build_txtai_index(
                args.index_dir / args.index, args.out_dir / f"txtai-{args.index}"
            )
            process, base = start_txtai(txtai_index, args.out_dir)
            target = txtai_target(args.k)
        try:
            asyncio.run(load(base, target, queries, 4, 50, 60, HEADERS))  # warm-up, not recorded
            for level in levels:
                before, machine_before = server_cpu_seconds(process.pid), machine_busy_seconds()
                client_before = time.process_time()
                result = asyncio.run(
                    load(base, target, queries, level, args.requests, args.max_seconds, HEADERS)
                )
                server_s = server_cpu_seconds(process.pid) - before
                # CPU the server spent per answer: its efficiency, whatever else shares the machine
                result["server_cpu_ms_per_request"] = round(
                    1000 * server_s / max(result["requests"], 1), 2
                )
                # Cores taken by neither the server nor this client (other jobs, the kernel's
                # loopback work done outside both): a run where this is high was disturbed.
                others_s = (
                    machine_busy_seconds()
                    - machine_before
                    - server_s
                    - (time.process_time() - client_before)
                )
                result["other_cpu_cores"] = round(others_s / max(result["seconds"], 1e-9), 2)
                figures["levels"].setdefault(level_key(figures["levels"], level, name), {})[
                    name
                ] = result
                print(name, json.dumps(result), flush=True)
        finally:
            stop(process)
    if args.soak_minutes:
        import pyarrow.parquet as pq

        source = pq.read_table(
            args.data_dir / "pypi" / "pypi_summaries.parquet", columns=["name", "summary"]
        )
        rows = [
            {"name": f"soak-{i}-{r['name']}", "summary": r["summary"] or "empty"}
            for i, r in enumerate(source.slice(0, 30_000).to_pylist())
        ]
        process, base = start_semsearch(args.index, args.index_dir, args.serve_args.split())
        try:
            figures["soak"] = asyncio.run(
                soak(base, args.index, queries, args.soak_minutes, rows, process.pid)
            )
            print("soak", json.dumps(figures["soak"]), flush=True)
        finally:
            stop(process)
    figures["environment"] = environment()
    results = record(args, "serve_load", figures)
    print(f"appended to {results}; median query chars {statistics.median(map(len, queries))}")


if __name__ == "__main__":
    main()
