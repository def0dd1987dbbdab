"""How much memory query encoding takes for itself in fp32, bf16, and bf16 warmed up front.

One process per setting (the caches are per process): the default model on one thread
encodes 2,400 random groups of 1-8 STS-B test sentences, as `semsearch serve`'s workers do;
the anonymous RSS is read before and after, and the CPU seconds of the two halves. bf16 on
a CPU goes through oneDNN, which compiles and keeps a kernel per matrix shape; `warmed`
first runs `warm_kernels` (what `serve` does at start-up) and measures the growth after it.

    python benchmarks/query_kernel_memory.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import (
    base_parser,
    environment,
    markdown_table,
    record,
)
from serve_load import stsb_queries

SETTINGS = ("fp32", "bf16", "bf16-warmed")
GROUPS = 2400


def anonymous_mib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon"):
                return int(line.split()[1]) // 1024
    return 0


def measure(setting: str, data_dir: str, count: int = GROUPS) -> dict:
    """Run in a child process: the figures of one setting."""
    import torch

    from semsearch.models.bi_encoder import BiEncoder
    from semsearch.models.query_precision import warm_kernels

    torch.set_num_threads(1)
    queries = stsb_queries(Path(data_dir), 2000)
    encoder = BiEncoder.load("default", device="cpu")
    precision = setting.split("-")[0]
    encoder.encode(queries[:8], batch_size=8, precision=precision)
    warm_s = 0.0
    if setting == "bf16-warmed":
        started = time.perf_counter()
        warm_kernels(encoder, "bf16", 8)
        warm_s = time.perf_counter() - started
    rng = np.random.default_rng(0)
    groups = [
        [queries[i] for i in rng.integers(0, len(queries), int(rng.integers(1, 9)))]
        for _ in range(count)
    ]
    before = anonymous_mib()
    cpu = []
    for half in (groups[: count // 2], groups[count // 2 :]):
        started = time.thread_time()
        for group in half:
            encoder.encode(group, batch_size=len(group), precision=precision)
        cpu.append(round(time.thread_time() - started, 2))
    return {"setting": setting, "rss_before_mib": before, "growth_mib": anonymous_mib() - before,
            "cpu_s_first_half": cpu[0], "cpu_s_second_half": cpu[1], "warm_s": round(warm_s, 1)}  # fmt: skip


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)  # one, in a child
    parser.add_argument("--groups", type=int, default=GROUPS, help="query groups per setting")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, str(args.data_dir), args.groups)))
        return
    rows = []
    for setting in SETTINGS:
        command = [sys.executable, __file__, "--child", setting, "--data-dir", str(args.data_dir),
                   "--groups", str(args.groups)]  # fmt: skip
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    figures = {"benchmark": "query_kernel_memory", "groups": args.groups, "settings": rows,
              "command": "python benchmarks/query_kernel_memory.py " + " ".join(sys.argv[1:]),
              "environment": environment()}  # fmt: skip
    record(args, "query_kernel_memory", figures)
    print(markdown_table(["setting", "RSS growth MiB", "CPU s (1st half)", "CPU s (2nd half)", "warm-up s"],
                         [[r["setting"], r["growth_mib"], r["cpu_s_first_half"], r["cpu_s_second_half"], r["warm_s"]]
                          for r in rows]))  # fmt: skip


if __name__ == "__main__":
    main()
