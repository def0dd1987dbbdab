"""Encoding throughput on CPU: semsearch's BiEncoder against sentence-transformers, same model.

Why: semsearch re-implements what sentence-transformers does (tokenise, transformer,
mean pooling, L2 normalisation), so it must be at least as fast and give the same vectors.
Two real corpora: 20,000 short PyPI summaries and 5,000 long Debian descriptions (many cut
at 256 tokens). Each round times both encoders on the whole corpus, alternating which goes
first; figures are medians over rounds, plus the cosine between the two vectors of each text.
With `--int8`, semsearch's opt-in int8 dynamic quantisation runs in the same rounds; its
vectors are compared with sentence-transformers' separately (they are meant to differ a
little; its quality cost is measured on STS-B with `semsearch eval sts --quantize int8`).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import (
    add_threads_option,
    args_dict,
    base_parser,
    environment,
    load_sentence_transformer,
    markdown_table,
    set_threads,
    write_json,
)

from semsearch.models import BiEncoder

WARMUP_TEXTS = 200
CORPORA = ("pypi_summaries", "debian_long")
INT8 = "semsearch --quantize int8"


def load_corpora(data_dir: Path, pypi_rows: int, debian_rows: int) -> dict[str, list[str]]:
    """The first `pypi_rows` PyPI summaries and the first `debian_rows` non-empty long descriptions."""
    pypi = pq.read_table(data_dir / "pypi" / "pypi_summaries.parquet", columns=["summary"])
    debian = pq.read_table(data_dir / "debian" / "debian_packages.parquet",
                           columns=["long_description"])  # fmt: skip
    long_texts = debian.column("long_description")
    non_empty = debian.filter(pc.not_equal(pc.utf8_trim_whitespace(long_texts), ""))
    return {
        "pypi_summaries": pypi.column("summary").slice(0, pypi_rows).to_pylist(),
        "debian_long": non_empty.column("long_description").slice(0, debian_rows).to_pylist(),
    }


def timed(encode: Callable[[list[str]], np.ndarray], texts: list[str]) -> tuple[dict, np.ndarray]:
    """Wall seconds, this process' CPU seconds (a wall/CPU gap shows contention) and the vectors."""
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = encode(texts)
    spent = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
             "load_1min": os.getloadavg()[0]}  # fmt: skip
    return spent, vectors


def mean_min_cosine(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    cosines = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cosines.mean()), float(cosines.min())


def row(corpus: str, encoder: str, batch: int, rounds: list[dict], texts: int, tokens: int) -> dict:
    """One table row: the median wall (and CPU) time over `rounds` turned into rates."""
    median = statistics.median(spent["wall"] for spent in rounds)
    median_cpu = statistics.median(spent["cpu"] for spent in rounds)
    return {"corpus": corpus, "encoder": encoder, "batch_size": batch, "texts": texts,
            "tokens": tokens, "rounds": [{key: round(value, 2) for key, value in spent.items()}
                                         for spent in rounds],
            "median_seconds": round(median, 2), "texts_per_s": round(texts / median, 1),
            "tokens_per_s": round(tokens / median),
            "texts_per_cpu_s": round(texts / median_cpu, 1)}  # fmt: skip


def bench_corpus(
    name: str, texts: list[str], ours: BiEncoder, anchor, args, int8: BiEncoder | None = None
) -> dict:
    """Alternating rounds of the encoders on `texts`, then semsearch alone at larger batches."""
    tokens = sum(len(ids) for ids in ours.tokenize(texts))
    encoders = {
        "semsearch": lambda batch: ours.encode(batch, batch_size=args.batch_size),
        "sentence-transformers": lambda batch: anchor.encode(
            batch, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False
        ),
    }
    if int8 is not None:
        encoders[INT8] = lambda batch: int8.encode(batch, batch_size=args.batch_size)
    for encode in encoders.values():
        encode(texts[:WARMUP_TEXTS])
    rounds: dict[str, list[dict]] = {label: [] for label in encoders}
    vectors: dict[str, np.ndarray] = {}
    for round_number in range(args.repeats):
        order = list(encoders) if round_number % 2 == 0 else list(reversed(encoders))
        for label in order:
            spent, vectors[label] = timed(encoders[label], texts)
            rounds[label].append(spent)
            print(f"  {name} round {round_number + 1}: {label} {spent}", flush=True)
    rows = [row(name, label, args.batch_size, rounds[label], len(texts), tokens)
            for label in encoders]  # fmt: skip
    for batch in args.extra_batch_sizes:
        extra = []
        for _ in range(args.extra_repeats):
            spent, _vectors = timed(lambda t, b=batch: ours.encode(t, batch_size=b), texts)
            extra.append(spent)
            print(f"  {name}: semsearch batch {batch} {spent}", flush=True)
        label = f"semsearch (extra, batch {batch})"
        rows.append(row(name, label, batch, extra, len(texts), tokens))
    anchor = rows[1]  # sentence-transformers at --batch-size
    for entry in rows:
        entry["ratio_vs_st"] = round(entry["texts_per_s"] / anchor["texts_per_s"], 3)
        entry["cpu_ratio_vs_st"] = round(entry["texts_per_cpu_s"] / anchor["texts_per_cpu_s"], 3)
    mean_cos, min_cos = mean_min_cosine(vectors["semsearch"], vectors["sentence-transformers"])
    result = {"rows": rows, "mean_tokens_per_text": round(tokens / len(texts), 1),
              "cosine_mean": mean_cos, "cosine_min": min_cos}  # fmt: skip
    if int8 is not None:
        int8_mean, int8_min = mean_min_cosine(vectors[INT8], vectors["sentence-transformers"])
        result.update(int8_cosine_mean=int8_mean, int8_cosine_min=int8_min)
    return result


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pypi-rows", type=int, default=20_000)
    parser.add_argument("--debian-rows", type=int, default=5_000)
    parser.add_argument("--batch-size", type=int, default=32, help="for both encoders")
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds per encoder")
    parser.add_argument("--extra-repeats", type=int, default=1, help="rounds per extra batch size")
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    parser.add_argument("--extra-batch-sizes", type=int, nargs="*", default=[64, 128],
                        help="semsearch-only rows at these batch sizes (none: skip)")  # fmt: skip
    parser.add_argument("--int8", action="store_true",
                        help="also time semsearch with int8 dynamic quantisation")  # fmt: skip
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    env = environment()
    ours = BiEncoder.load(device="cpu")
    anchor = load_sentence_transformer()
    int8 = BiEncoder.load(device="cpu", quantization="int8") if args.int8 else None
    results = {}
    for name, texts in load_corpora(args.data_dir, args.pypi_rows, args.debian_rows).items():
        if name not in args.corpora:
            continue
        results[name] = bench_corpus(name, texts, ours, anchor, args, int8)
        result = results[name]
        print(f"\n{name}: {len(texts)} texts, {result['mean_tokens_per_text']} tokens/text, "
              f"cosine mean {result['cosine_mean']:.6f} min {result['cosine_min']:.6f}")  # fmt: skip
        if int8 is not None:
            print(f"int8 vs sentence-transformers: cosine mean {result['int8_cosine_mean']:.6f} "
                  f"min {result['int8_cosine_min']:.6f}")  # fmt: skip
        print(markdown_table(
            ["encoder", "batch", "median s", "texts/s", "tokens/s", "semsearch/ST", "texts/CPU-s",
             "semsearch/ST (CPU)"],
            [[r["encoder"], r["batch_size"], r["median_seconds"], r["texts_per_s"],
              r["tokens_per_s"], r["ratio_vs_st"], r["texts_per_cpu_s"], r["cpu_ratio_vs_st"]]
             for r in result["rows"]],
        ))  # fmt: skip
    payload = {"benchmark": "encode_throughput", "args": args_dict(args), "environment": env,
               "load_average_after": list(os.getloadavg()), "results": results}  # fmt: skip
    name = "encode_throughput" + (f"_threads{args.threads}" if args.threads else "")
    name += "_int8" if args.int8 else ""
    if set(args.corpora) != set(CORPORA):
        name += "_" + "_".join(args.corpora)
    print(f"\nwrote {write_json(args.out_dir, name + '.json', payload)}")


if __name__ == "__main__":
    main()
