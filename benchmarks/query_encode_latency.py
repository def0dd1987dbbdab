"""How long one query takes to encode, fp32 against int8, on one and two threads.

Why: the encoder is most of a warm query's latency on CPU (a one-text forward pass reads
all ~90 MB of fp32 weights), so this is the part of the p50 goal that the index cannot fix.

    python benchmarks/query_encode_latency.py          # about 20 s
    python benchmarks/query_encode_latency.py --compile   # adds torch.compile rows, ~1.5 min
"""

from __future__ import annotations

import time

import numpy as np
import torch
from common import base_parser, environment, markdown_table, record

from semsearch.models import BiEncoder

QUERIES = ["library for parsing json files quickly", "a web framework for building rest apis",
           "plot charts from dataframes"]  # fmt: skip


def encode_p50_ms(encoder: BiEncoder, queries: list[str], warmup: int = 10) -> float:
    for query in queries[:warmup]:
        encoder.encode([query])
    times = []
    for query in queries:
        started = time.perf_counter()
        encoder.encode([query])
        times.append(time.perf_counter() - started)
    return round(1000 * float(np.median(times)), 2)


def compiled_p50_ms(queries: list[str]) -> float:
    """One-query p50 through inductor with frozen (prepacked) weights: same vectors to ~1e-6."""
    import torch._inductor.config as inductor

    inductor.freezing = True  # weights become constants: for inference only
    encoder = BiEncoder.load("default", device="cpu")
    encoder.transformer = torch.compile(encoder.transformer, dynamic=True)
    started = time.perf_counter()
    encode_p50_ms(encoder, queries[:3], warmup=3)  # compiles
    print(f"compiled in {time.perf_counter() - started:.1f} s", flush=True)
    return encode_p50_ms(encoder, queries)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40, help="rounds over the queries")
    parser.add_argument("--compile", action="store_true",
                        help="also time fp32 through torch.compile with frozen weights "
                        "(inductor; about 20-30 s to compile per thread count)")  # fmt: skip
    args = parser.parse_args()
    queries = QUERIES * args.repeats
    rows = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for quantization in (None, "int8"):
            encoder = BiEncoder.load("default", device="cpu", quantization=quantization)
            rows.append([threads, quantization or "fp32", encode_p50_ms(encoder, queries)])
        if args.compile:
            rows.append([threads, "fp32, torch.compile (frozen weights)", compiled_p50_ms(queries)])
    print(markdown_table(["threads", "encoder", "one-query encode p50 ms"], rows))
    payload = {"benchmark": "query_encode_latency", "queries": len(queries),
               "rows": [dict(zip(("threads", "encoder", "p50_ms"), row)) for row in rows],
               "environment": environment()}  # fmt: skip
    record(args, "query_encode_latency", payload)


if __name__ == "__main__":
    main()
