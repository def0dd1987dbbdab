"""Peak resident memory of `build` (your own vectors), `add`, `compact` and `reindex` as the
rows grow: what each command holds beyond the FAISS index it fills should not grow with them.

    python benchmarks/bounded_memory.py --rows 200000 1000000

Each command runs in its own process (`python -m semsearch ...`), sampled every 50 ms in
/proc/PID/status: `peak_anon_mib` is the largest anonymous resident memory seen (`RssAnon`:
what the machine cannot reclaim), `peak_rss_mib` the kernel's high-water mark (`VmHWM`),
which also counts the pages of memory-mapped files read (the corpus, the stored vectors),
page cache the kernel takes back under pressure. (`ru_maxrss` would count the parent's
memory, inherited at fork.) The corpus is random unit vectors (384-d,
a fixed-size list column) with short texts of random words, so the BM25 part is built too.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import common
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

WORDS = [f"w{number}" for number in range(5_000)]
CHUNK = 50_000


def write_corpus(path: Path, rows: int, dimension: int, first_id: int = 0, seed: int = 0) -> None:
    """`rows` random unit vectors with ids and short texts, written in chunks."""
    rng = np.random.default_rng(seed)
    words = np.array(WORDS)
    schema = pa.schema(
        [("key", pa.int64()), ("text", pa.string()), ("emb", pa.list_(pa.float32(), dimension))]
    )
    temporary = path.with_name(f".{path.name}.tmp")
    with pq.ParquetWriter(temporary, schema) as writer:
        for start in range(0, rows, CHUNK):
            count = min(CHUNK, rows - start)
            vectors = common.unit_vectors(rng, count, dimension)
            texts = [" ".join(line) for line in words[rng.integers(0, len(words), (count, 6))]]
            emb = common.vector_column(vectors)
            keys = pa.array(np.arange(first_id + start, first_id + start + count))
            writer.write_table(pa.table([keys, pa.array(texts), emb], schema=schema))
    os.replace(temporary, path)


def run(command: list[str]) -> dict:
    """Run a semsearch command in a child process: its seconds and peak RSS (MiB)."""
    ran = common.run_timed([sys.executable, "-m", "semsearch", *command], sample=True, quiet=True)
    return {"seconds": round(ran["seconds"], 1), **{k: v for k, v in ran.items() if "peak" in k}}


def index_bytes(folder: Path) -> int:
    manifest = json.loads((folder / "manifest.json").read_text())
    return sum(segment["index_file_bytes"] for segment in manifest["segments"])


def measure(rows: int, args) -> dict:
    work = args.work_dir / f"r{rows}"
    work.mkdir(parents=True, exist_ok=True)
    corpus, extra = work / "corpus.parquet", work / "extra.parquet"
    if not corpus.exists():
        write_corpus(corpus, rows, args.dimension)
    added = max(1, rows // 100)
    if not extra.exists():  # new rows, and as many replacing old ones
        write_corpus(extra, added, args.dimension, first_id=rows - added // 2, seed=1)
    indexes = work / "indexes"
    shutil.rmtree(indexes, ignore_errors=True)
    where = ["--index-dir", str(indexes)]
    figures = {"rows": rows, "dimension": args.dimension, "index_type": args.index_type}
    figures["baseline"] = run(["list", *where])  # the interpreter and imports alone
    options = ["--index-type", args.index_type, "--target-recall", str(args.target_recall), *where]
    columns = ["--vector-column", "emb", "--id-column", "key"]
    figures["build"] = run(["build", str(corpus), "--name", "b", *columns, *options])
    figures["build"]["index_mib"] = round(index_bytes(indexes / "b") / 2**20, 1)
    figures["add"] = run(["add", str(extra), "--index", "b", *where])
    figures["compact"] = run(["compact", "b", *where])
    figures["compact"]["index_mib"] = round(index_bytes(indexes / "b") / 2**20, 1)
    figures["reindex"] = run(["reindex", "b", *options])
    figures["reindex"]["index_mib"] = round(index_bytes(indexes / "b") / 2**20, 1)
    return figures


def main() -> None:
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_results_option(parser)
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    common.add_options(
        parser,
        dimension=384,
        index_type="ivfsq",
        target_recall=(0.0, "0 skips tuning (its exact search is timed elsewhere)"),
        work_dir=Path("/tmp/semsearch-bounded"),
    )
    args = parser.parse_args()
    for rows in args.rows:
        figures = measure(rows, args)
        print(json.dumps(figures), flush=True)
        common.record(args, "bounded_memory", figures)


if __name__ == "__main__":
    main()
