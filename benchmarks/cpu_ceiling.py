"""How close CPU encoding is to this CPU's limit, and where sentence-transformers loses time.

Why: the goal asks semsearch for 1.5x sentence-transformers' speed with the same vectors.
With the same fp32 arithmetic the only room is work that one does and the other does not,
so this measures (1) padding: padded tokens per real token when batches are sorted by
token length (semsearch) or by characters (sentence-transformers); (2) where the time goes
(a torch profile of both encoders on the same texts); (3) the fp32 rate of the model's
largest matrix product through PyTorch's default path, oneDNN and MKL's packed GEMM, the
ceiling for any encoder on this core.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
from common import (
    base_parser,
    corpus_texts,
    environment,
    load_sentence_transformer,
    markdown_table,
    record,
    reference_model_path,
)

from semsearch.models import BiEncoder
from semsearch.models.batching import plan_batches


def padding_ratios(texts: list[str], lengths: np.ndarray, batch: int) -> dict[str, float]:
    """Padded tokens / real tokens, batches sorted by tokens (ours) or by characters (ST)."""
    ours = sum(len(rows) * lengths[rows].max() for rows in plan_batches(lengths, batch, None))
    by_chars = np.argsort([-len(text) for text in texts], kind="stable")
    theirs = sum(len(rows) * lengths[rows].max()
                 for rows in (by_chars[i : i + batch] for i in range(0, len(texts), batch)))  # fmt: skip
    return {"semsearch": ours / lengths.sum(), "sentence-transformers": theirs / lengths.sum()}


def op_shares(encode: Callable[[], object]) -> dict[str, float]:
    """Share of self CPU time per operator over one call of `encode` (after a warm-up)."""
    encode()
    with torch.profiler.profile() as profile:
        encode()
    events = profile.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    top = sorted(events, key=lambda event: -event.self_cpu_time_total)[:5]
    return {event.key: round(event.self_cpu_time_total / total, 4) for event in top}


def gemm_rates(rows: int, hidden: int, inner: int, repeats: int = 20) -> dict[str, float]:
    """GFLOP/s of [rows x hidden] @ [hidden x inner] (+ bias), fp32, by three routes."""
    x, weight, bias = torch.randn(rows, hidden), torch.randn(inner, hidden), torch.randn(inner)
    routes = {"torch linear (default)": lambda: torch.nn.functional.linear(x, weight, bias)}
    dense = (x.to_mkldnn(), weight.to_mkldnn(), bias.to_mkldnn())
    routes["oneDNN linear"] = lambda: torch._C._nn.mkldnn_linear(*dense)
    if hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight"):
        packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows)
        routes["MKL packed GEMM"] = lambda: torch.ops.mkl._mkl_linear(x, packed, weight, bias, rows)
    rates = {}
    for name, run in routes.items():
        run()
        started = time.perf_counter()
        for _ in range(repeats):
            run()
        rates[name] = round(
            2 * rows * hidden * inner * repeats / (time.perf_counter() - started) / 1e9, 1
        )
    return rates


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300, help="Debian texts to profile")
    parser.add_argument("--padding-rows", type=int, default=5_000, help="Debian texts for padding")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ours = BiEncoder.load(str(reference_model_path()), device="cpu")
    anchor = load_sentence_transformer()
    texts = corpus_texts(args.data_dir, "debian", max(args.rows, args.padding_rows))
    lengths = np.array([len(ids) for ids in ours.tokenize(texts[: args.padding_rows])])
    padding = padding_ratios(texts[: args.padding_rows], lengths, args.batch_size)
    sample = texts[: args.rows]
    shares = {
        "semsearch": op_shares(lambda: ours.encode(sample, batch_size=args.batch_size)),
        "sentence-transformers": op_shares(
            lambda: anchor.encode(sample, batch_size=args.batch_size)
        ),
    }
    config = ours.transformer.config
    gemm = gemm_rates(args.batch_size * int(lengths.mean()), config.hidden_size,
                      config.intermediate_size)  # fmt: skip
    print(markdown_table(["batches sorted by", "padded / real tokens"],
                         [[name, round(value, 4)] for name, value in padding.items()]))  # fmt: skip
    for name, top in shares.items():
        print(f"\n{name}, share of CPU time:\n"
              + markdown_table(["operator", "share"], [[op, share] for op, share in top.items()]))  # fmt: skip
    print("\nfp32 GEMM, one thread:\n"
          + markdown_table(["route", "GFLOP/s"], [[name, rate] for name, rate in gemm.items()]))  # fmt: skip
    payload = {"benchmark": "cpu_ceiling", "args": vars(args) | {"data_dir": str(args.data_dir),
               "out_dir": str(args.out_dir)}, "environment": environment(),
               "padding": padding, "op_shares": shares, "gemm_gflops": gemm}  # fmt: skip
    record(args, "cpu_ceiling", payload)


if __name__ == "__main__":
    main()
