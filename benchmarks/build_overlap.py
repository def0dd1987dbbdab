"""Does the build keep the encoder busy? Encode time against build time, pipelined and not.

Why: a build reads, hashes, tokenises, encodes and writes each part; done one after the
other, the encoder (a GPU, in the end) idles during everything but encoding. The build now
runs those steps as overlapped stages (`semsearch.ingest.pipeline`). This script builds N
PyPI summaries twice, with the stages overlapped (`pipeline_depth` 1) and one after the other
(depth 0), and times the encoder's calls inside each build: when the stages overlap, the
encoder's time is the build's time minus its start-up (scan, first part read and tokenised)
and its finish (the FAISS index, the lexical part, the manifest). It also measures the fast
tokenizer's texts/s against its thread count (RAYON_NUM_THREADS, set per process: the Rust
thread pool reads it once). Figures are appended to benchmarks/results/build_overlap.jsonl;
on a shared machine they are noisy, so the load average is recorded with them.

    flock /tmp/cpu.lock python benchmarks/build_overlap.py --rows 20000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import (
    add_results_option,
    add_threads_option,
    args_dict,
    base_parser,
    command_line,
    device_label,
    environment,
    read_corpus,
    record,
    set_threads,
)

TOKENISER_CHUNK = 16_384  # texts per tokenizer call, as the build's tokenise stage makes them


class TimedEncoder:
    """Wraps an encoder and records when each of its `encode` calls ran."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.calls: list[tuple[float, float]] = []

    def __getattr__(self, name: str):
        return getattr(self.encoder, name)

    def encode(self, texts, **kwargs):
        started = time.perf_counter()
        try:
            return self.encoder.encode(texts, **kwargs)
        finally:
            self.calls.append((started, time.perf_counter()))


def summaries(data_dir: Path, rows: int) -> pa.Table:
    table = read_corpus(data_dir, "pypi", columns=["name", "summary"])
    table = table.filter(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(table["summary"])), 0))
    if table.num_rows < rows:
        sys.exit(f"only {table.num_rows} summaries with a text: ask for fewer --rows")
    return table.slice(0, rows).rename_columns(["name", "text"])


def timed_build(corpus: Path, out_dir: Path, encoder, args, depth: int) -> dict:
    """One build with its encoder's calls timed; the figures of the overlap."""
    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions

    timed = TimedEncoder(encoder)
    options = BuildOptions(
        corpus=corpus,
        name=f"depth{depth}",
        out_dir=out_dir,
        index="flat",
        batch_size=args.batch_size,
        part_rows=args.part_rows,
        show_progress=False,
        target_recall=None,
        pipeline_depth=depth,
        overwrite=True,
    )
    started = time.perf_counter()
    build_index(options, encoder=timed)
    build_s = time.perf_counter() - started
    first, last = timed.calls[0][0], timed.calls[-1][1]
    encode_s = sum(end - start for start, end in timed.calls)
    startup_s, finish_s = first - started, started + build_s - last
    return {
        "pipeline_depth": depth,
        "parts": len(timed.calls),
        "build_s": round(build_s, 2),
        "startup_s": round(startup_s, 2),  # until the first part reached the encoder
        "finish_s": round(finish_s, 2),  # after the last part left it: index, lexical, manifest
        "encode_s": round(encode_s, 2),
        "build_minus_startup_s": round(build_s - startup_s, 2),
        # The encoder's share of the time from its first call to its last: 1.0 means it never
        # waited for reading, hashing, tokenising or writing.
        "encoder_busy": round(encode_s / max(last - first, 1e-9), 3),
        "texts_per_s": round(args.rows / build_s, 1),
    }


def tokeniser_rates(texts_file: Path, thread_counts: list[int]) -> list[dict]:
    """Texts/s of the fast tokenizer per thread count, each in a process of its own."""
    rates = []
    for threads in thread_counts:
        env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
        probe = subprocess.run(
            [sys.executable, __file__, "--tokeniser-probe", str(texts_file)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        rates.append({"threads": threads, **json.loads(probe.stdout.strip().splitlines()[-1])})
        print(
            f"tokeniser, {threads} thread(s): {rates[-1]['texts_per_s']:,.0f} texts/s", flush=True
        )
    return rates


def tokeniser_probe(texts_file: Path) -> None:
    """Run in a child process: the best of three passes over the texts, in build-sized chunks."""
    from semsearch.models import BiEncoder

    encoder = BiEncoder.load("default", device="cpu")
    texts = pq.read_table(texts_file).column("text").to_pylist()
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for low in range(0, len(texts), TOKENISER_CHUNK):
            encoder.tokenize(texts[low : low + TOKENISER_CHUNK])
        best = min(best, time.perf_counter() - started)
    print(
        json.dumps(
            {
                "texts": len(texts),
                "seconds": round(best, 3),
                "texts_per_s": round(len(texts) / best, 1),
            }
        )
    )


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000, help="PyPI summaries to build")
    parser.add_argument(
        "--part-rows",
        type=int,
        default=4096,
        help="rows per part (the build's default is 16,384; smaller parts show "
        "the overlap at a modest --rows)",
    )
    parser.add_argument("--batch-size", type=int, default=None, help="texts per forward pass")
    parser.add_argument(
        "--depths",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[0, 1, 0, 1],
        help="pipeline depths to build with, in this order "
        "(alternated and repeated: the first build also warms the model)",
    )
    parser.add_argument(
        "--tokeniser-threads", default="1,2", help="thread counts to measure the tokenizer at"
    )
    parser.add_argument("--tokeniser-probe", type=Path, help=argparse.SUPPRESS)
    add_threads_option(parser)
    add_results_option(parser)
    args = parser.parse_args()
    if args.tokeniser_probe:
        return tokeniser_probe(args.tokeniser_probe)
    set_threads(args.threads)
    from semsearch.models import BiEncoder

    with tempfile.TemporaryDirectory(prefix="build_overlap-") as scratch:
        corpus = Path(scratch) / "summaries.parquet"
        pq.write_table(summaries(args.data_dir, args.rows), corpus)
        encoder = BiEncoder.load("default", device="cpu")
        encoder.encode(["warm up the model"])
        runs = []
        for depth in args.depths:
            runs.append(timed_build(corpus, Path(scratch) / "indexes", encoder, args, depth))
            print(json.dumps(runs[-1]), flush=True)
        tokeniser = tokeniser_rates(corpus, [int(n) for n in args.tokeniser_threads.split(",")])
    line = {
        "benchmark": "build_overlap",
        "command": command_line(),
        "device": device_label("cpu"),
        "rows": args.rows,
        "options": {k: v for k, v in args_dict(args).items() if k != "tokeniser_probe"},
        "builds": runs,
        "tokeniser": tokeniser,
        "environment": environment(),
    }
    record(args, "build_overlap", line)


if __name__ == "__main__":
    main()
