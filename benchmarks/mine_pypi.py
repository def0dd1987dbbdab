"""Mining all 841,708 PyPI summaries for their most similar pairs: time, peak memory, results.

It reuses a built index's vectors and IVF structure (encoding them takes ~40 min on 2 cores);
`--limit N` encodes and mines the first N rows instead (0: all, as on a GPU).

    python benchmarks/mine_pypi.py --device cuda --limit 0 --data-dir .gpu/data --model /tmp/model
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow.parquet as pq
from common import (
    PeakRss,
    add_index_options,
    args_dict,
    base_parser,
    corpus_head,
    environment,
    record,
)

from semsearch.errors import SemsearchError
from semsearch.mining import CorpusSource, MiningOptions, mine_corpus, mine_index
from semsearch.mining.recall import mined_recall
from semsearch.store.manifest import MANIFEST_FILE, Manifest

SCORE_LEVELS = (0.99, 0.95, 0.9, 0.8)


def find_pypi_index(index_dir: Path) -> str | None:
    """The index folder in `index_dir` built from pypi_summaries.parquet, if there is one."""
    for manifest_file in sorted(index_dir.glob(f"*/{MANIFEST_FILE}")):
        manifest = Manifest.read(manifest_file.parent)
        if manifest.source.path.endswith("pypi_summaries.parquet"):
            return manifest_file.parent.name
    return None


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_index_options(parser, index=None)  # None: the PyPI one found
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="no index: encode and mine the file's first N rows (0: all)",
    )
    parser.add_argument("-k", "--top-k", type=int, default=10)
    parser.add_argument("--exact-duplicates", default="separate")
    parser.add_argument("--nprobe", type=int, default=None)
    parser.add_argument("--write-top", type=int, default=100_000, help="pairs written to Parquet")
    parser.add_argument("--show", type=int, default=20)
    parser.add_argument("--recall-sample", type=int, default=1000)
    parser.add_argument(
        "--device",
        default="auto",
        help="auto, cpu, cuda or cuda:N: where the model encodes and FAISS searches",
    )
    parser.add_argument("--model", default="default", help="bi-encoder for --limit (a folder)")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)  # the pairs are written there
    options = MiningOptions(
        top_k=args.top_k,
        exact_duplicates=args.exact_duplicates,
        nprobe=args.nprobe,
        show_progress=True,
        device=args.device,
    )
    index = args.index or (None if args.limit is not None else find_pypi_index(args.index_dir))
    if index is None and args.limit is None:
        raise SemsearchError(f"no PyPI index in {args.index_dir}/: build one or pass --limit N")
    rss_before = psutil.Process().memory_info().rss
    with PeakRss(every_s=0.1) as rss:
        started = time.perf_counter()
        if index is not None:
            result = mine_index(index, args.index_dir, options)
        else:
            corpus = _first_rows(args.data_dir, args.limit, args.out_dir, args.model, args.device)
            result = mine_corpus(corpus, options)
        seconds = time.perf_counter() - started
    peak = rss.peak

    label = index or (f"first{args.limit}" if args.limit else "all")
    started = time.perf_counter()
    pairs_file = args.out_dir / f"mine_pypi_pairs_{label}.parquet"
    pq.write_table(result.to_table(args.write_top), pairs_file)
    if result.duplicates is not None:
        result.duplicates.write(args.out_dir / f"mine_pypi_duplicates_{label}.parquet")
    write_seconds = time.perf_counter() - started
    recall = mined_recall(result, args.recall_sample, result.stats.top_k)

    top_pairs = [
        {**record, "score": round(record["score"], 4)} for record in result.records(args.show)
    ]
    groups = result.duplicates.table.slice(0, 10).to_pylist() if result.duplicates else []
    largest = [{"text": g["text"], "count": g["count"], "first_ids": g["ids"][:5]} for g in groups]
    levels = {f">={level}": int(np.sum(result.scores >= level)) for level in SCORE_LEVELS}
    summary = {
        "source": f"index {index}" if index else f"first {args.limit} rows encoded",
        "rows": result.stats.rows,
        "searched_rows": result.stats.searched_rows,
        "exact_duplicate_rows": result.stats.exact_duplicate_rows,
        "duplicate_groups": len(result.duplicates) if result.duplicates else None,
        "rows_in_duplicate_groups": result.duplicates.rows if result.duplicates else None,
        "structure": result.stats.structure,
        "top_k": result.stats.top_k,
        "pairs_found": result.pairs_found,
        "pairs_by_score": levels,
        "seconds": round(seconds, 1),
        "phases": result.stats.phases,
        "write_seconds": round(write_seconds, 1),
        "rss_before_mib": round(rss_before / 2**20),
        "peak_rss_sampled_mib": round(peak / 2**20),
        "ru_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "exact_recall": recall,
    }
    print(json.dumps(summary, indent=2))
    torch_device = args.device if args.device != "auto" else _auto_device()
    figures = {
        "args": args_dict(args),
        "environment": environment(),
        **summary,
        "exact_recall": recall["recall"],
        "exact_recall_detail": recall,
        "peak_rss_mib": summary["peak_rss_sampled_mib"],
        "top_pairs": top_pairs,
        "largest_duplicate_groups": largest,
    }
    record(args, "mine_pypi", figures, device=torch_device)
    print(f"pairs in {pairs_file}")


def _first_rows(data_dir: Path, limit: int, out_dir: Path, model: str, device: str) -> CorpusSource:
    """The file's first `limit` rows (0: all) as a corpus; ids are the names where the file
    has them (gpu_carry.py's extract keeps the summaries alone: ids are then row numbers)."""
    target = corpus_head(data_dir, "pypi", limit, out_dir / "tmp")
    id_column = "name" if "name" in pq.read_schema(target).names else None
    return CorpusSource(
        target, text_column="summary", id_column=id_column, model=model, device=device
    )


def _auto_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


if __name__ == "__main__":
    main()
