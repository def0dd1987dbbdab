"""How fast the command line answers from a cold start, and where a cold query's time goes.

Each command runs in a fresh interpreter `--runs` times (median wall and CPU time), beside
the script a sentence-transformers + FAISS user would write for the same query.

    python benchmarks/startup.py --runs 5
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from common import REPO_ROOT, base_parser, environment, record, reference_model_path

DEMO_CORPUS = REPO_ROOT / "data" / "demo" / "debian_packages.parquet"
INDEX = "debian-demo"
QUERY = "edit photos and images"
SEMSEARCH = [sys.executable, "-m", "semsearch"]

# Where a cold query's time goes: each stage timed in one fresh interpreter, in the order
# `semsearch query` runs them (OpenVINO compiles the export in a thread while FAISS and
# pyarrow are imported: "wait for the compile" is what is left of it).
STAGES = """
import json, sys, time
from pathlib import Path
marks = [("start", time.perf_counter())]
def mark(name): marks.append((name, time.perf_counter()))
import semsearch.cli.app; mark("import semsearch CLI")
from semsearch.store.folders import find_index
from semsearch.models.query_loader import start_open_for_queries
folder = find_index(sys.argv[1], Path(sys.argv[2]))
opening = start_open_for_queries(folder.manifest().model, "cpu")
mark("import openvino, check the export, start its compile, read the tokenizer")
import faiss; mark("import faiss")
import pyarrow.parquet; mark("import pyarrow")
from semsearch.search.searcher import Searcher; mark("import semsearch.search.searcher")
encoder = opening(); mark("wait for the compile")
searcher = Searcher(folder, encoder=encoder); mark("open the index")
searcher.search([sys.argv[3]], k=5); mark("first query")
searcher.search([sys.argv[3]], k=5); mark("second query")
print(json.dumps({name: round(t - marks[i][1], 4) for i, (name, t) in enumerate(marks[1:])}))
"""

# The peer: sentence-transformers for the vector, FAISS for the search, pyarrow for the rows.
PEER = """
import sys
import faiss, numpy as np, pyarrow.parquet as pq
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device="cpu")
index = faiss.read_index(sys.argv[2])
vector = model.encode([sys.argv[4]], normalize_embeddings=True).astype(np.float32)
scores, ids = index.search(vector, 5)
table = pq.read_table(sys.argv[3])
print(table.take(ids[0][ids[0] >= 0].tolist()).column("package").to_pylist())
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) for one run; a failure stops the benchmark."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    stderr = process.stderr.read().decode() if process.stderr else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 2):
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {stderr[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(command: list[str], env: dict[str, str], runs: int, before=None) -> dict:
    walls, cpus = [], []
    for _ in range(runs):
        if before is not None:
            before()
        wall, cpu = timed(command, env)
        walls.append(wall)
        cpus.append(cpu)
    return {
        "wall_s": round(statistics.median(walls), 3),
        "cpu_s": round(statistics.median(cpus), 3),
        "wall_runs": [round(w, 3) for w in walls],
    }


def torch_modules(command: list[str], env: dict[str, str]) -> int:
    """How many torch modules `command` imports (`python -X importtime`): 0 for a command
    that encodes nothing."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]], env=env, capture_output=True, text=True
    )
    return sum(
        1
        for line in done.stderr.splitlines()
        if line.split("|")[-1].strip().split(".")[0] == "torch"
    )


def serve_ready(index_dir: str, env: dict[str, str], limit_s: float = 120.0) -> dict:
    """Seconds from starting `semsearch serve` until /health answers 200 (model and index
    loaded) and until /ready says `warm`; None for a mark not reached within `limit_s`."""
    import socket
    import urllib.error
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    server = subprocess.Popen(
        [*SEMSEARCH, "serve", "--index-dir", index_dir, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    marks: dict[str, float | None] = {"health_200": None, "warm": None}

    def answer(path: str) -> tuple[int | None, dict]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, {}
        except OSError:
            return None, {}

    try:
        while time.monotonic() - started < limit_s and marks["warm"] is None:
            if marks["health_200"] is None and answer("/health")[0] == 200:
                marks["health_200"] = round(time.monotonic() - started, 2)
            status, body = answer("/ready")
            if status == 200 and body.get("warm"):
                marks["warm"] = round(time.monotonic() - started, 2)
            time.sleep(0.05)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return marks


def demo_corpus(rows: int | None, folder: Path) -> Path:
    """The demo corpus, or its first `rows` rows as a Parquet file in `folder`."""
    if not rows:
        return DEMO_CORPUS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"demo_first{rows}.parquet"
    pq.write_table(pq.read_table(DEMO_CORPUS).slice(0, rows), path)
    return path


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh starts per command")
    parser.add_argument("--index-dir", type=Path, default=REPO_ROOT / "benchmarks/out/startup")
    parser.add_argument("--demo-rows", type=int, help="index only the demo corpus' first N rows")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="semsearch-cache-"))
    # As an installed package runs: with its bytecode cached. This machine sets
    # PYTHONDONTWRITEBYTECODE, which would recompile semsearch's modules on every start.
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env["SEMSEARCH_CACHE_DIR"] = str(cache)
    index_dir = str(args.index_dir)
    corpus = demo_corpus(args.demo_rows, args.index_dir)
    on_index = ["--index", INDEX, "--index-dir", index_dir]
    if not (args.index_dir / INDEX / "manifest.json").is_file():
        build = ["build", str(corpus), "--name", INDEX, "--id-column", "package", "--overwrite"]
        subprocess.run([*SEMSEARCH, "-q", *build, "--out-dir", index_dir], check=True, env=env)
    query = [*SEMSEARCH, "query", QUERY, *on_index, "-k", "5"]
    segment = args.index_dir / INDEX / "segments" / "s000000"
    peer = [
        sys.executable,
        "-c",
        PEER,
        str(reference_model_path()),
        str(next(segment.glob("index-g*.faiss"))),
        str(segment / "part-00000.parquet"),  # the rows (a chunked part's chunk rows)
        QUERY,
    ]

    encode_nothing = {  # the index's own corpus again (every row unchanged); stored vectors
        "add, every row unchanged": [*SEMSEARCH, "-q", "add", str(corpus), *on_index],
        "mine --index (stored vectors)": [*SEMSEARCH, "-q", "mine", *on_index, "--show", "0"],
    }

    def empty_cache() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    rows = {
        "semsearch --help": measure([*SEMSEARCH, "--help"], env, args.runs),
        "semsearch list": measure([*SEMSEARCH, "list", "--index-dir", index_dir], env, args.runs),
        "semsearch info": measure(
            [*SEMSEARCH, "info", INDEX, "--index-dir", index_dir], env, args.runs
        ),
        "an error (no such index)": measure(
            [*SEMSEARCH, "query", "x", "--index", "nope", "--index-dir", index_dir], env, args.runs
        ),
        "query, first after install (exports)": measure(query, env, args.runs, before=empty_cache),
        "query, checked export (default)": measure(query, env, args.runs),
        "query, full encoder (--runtime torch)": measure(
            [*query, "--runtime", "torch"], env, args.runs
        ),
        "peer: sentence-transformers + FAISS script": measure(peer, env, args.runs),
        # Commands that encode nothing: neither should load a model or import torch.
        **{name: measure(command, env, args.runs) for name, command in encode_nothing.items()},
    }
    torch_free = {name: torch_modules(command, env) for name, command in encode_nothing.items()}
    stages = json.loads(
        subprocess.run(
            [sys.executable, "-c", STAGES, INDEX, index_dir, QUERY],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        ).stdout
    )
    serve = serve_ready(index_dir, env)
    shutil.rmtree(cache, ignore_errors=True)
    peer_wall = rows["peer: sentence-transformers + FAISS script"]["wall_s"]
    figures = {
        "benchmark": "startup",
        "runs": args.runs,
        "commands": rows,
        "cold_query_stages_s": stages,
        "serve_s": serve,
        "torch_modules_imported": torch_free,
        "query_vs_peer": round(rows["query, checked export (default)"]["wall_s"] / peer_wall, 3),
        "environment": environment(),
        "command": "python benchmarks/startup.py " + " ".join(sys.argv[1:]),
    }
    results = record(args, "startup", figures)
    for name, row in rows.items():
        print(f"{name}: wall {row['wall_s']} s, CPU {row['cpu_s']} s")
    print(f"cold query stages: {stages}\nserve, seconds from start: {serve}; in {results}")


if __name__ == "__main__":
    main()
