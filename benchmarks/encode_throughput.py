"""Encoding throughput: semsearch's BiEncoder against sentence-transformers, same model and device.

Why: semsearch re-implements what sentence-transformers does (tokenise, transformer, mean
pooling, L2 normalisation), so it must be faster and give the same vectors. Two real
corpora: short PyPI summaries and long Debian descriptions (many cut at 256 tokens). Each
round times semsearch and sentence-transformers on the whole corpus at the same batch size,
alternating which goes first; figures are medians over rounds. Every row's vectors are
compared with sentence-transformers' fp32 vectors (goal: mean cosine >= 0.999, min >= 0.995).
`--variant` adds semsearch-only rows (batch size, token budget, precision) to see what pays.
On a GPU the rows also give peak GPU memory and the model's FLOP rate against the bf16 peak.
"""

from __future__ import annotations

import copy
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from common import (
    PeakRss,
    add_threads_option,
    args_dict,
    base_parser,
    environment,
    load_sentence_transformer,
    markdown_table,
    reference_model_path,
    set_threads,
    write_json,
)

from semsearch.models import BiEncoder, bi_encoder

WARMUP_TEXTS = 2_000
CORPORA = ("pypi_summaries", "debian_long")
ANCHOR = "sentence-transformers"
ANCHOR_BF16 = "sentence-transformers bf16"
# Dense bf16 tensor-core peak of the H100/H200 SXM data sheets, TFLOP/s.
SPEC_BF16_PEAK_TFLOPS = 989.4
Encode = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Variant:
    """One way to run semsearch: rows per batch (None: the device's default), a token budget,
    a precision (`bf16`/`fp16` cast the weights), or int8 dynamic quantisation (CPU)."""

    batch_size: int | None
    max_tokens: int | None = None
    precision: str = "auto"
    int8: bool = False
    pin: bool = True

    @classmethod
    def parse(cls, text: str) -> Variant:
        """`b=512,t=32768,p=bf16` (t and p optional; b=default for the device's); `b=32,int8`."""
        fields = dict(part.split("=") if "=" in part else (part, "1") for part in text.split(","))
        batch = None if fields["b"] == "default" else int(fields["b"])
        return cls(batch_size=batch, max_tokens=int(fields["t"]) if "t" in fields else None,
                   precision=fields.get("p", "auto"), int8="int8" in fields,
                   pin="nopin" not in fields)  # fmt: skip

    @property
    def label(self) -> str:
        kind = f"{self.precision}{' int8' if self.int8 else ''}{'' if self.pin else ' unpinned'}"
        if self.batch_size is None:
            return f"semsearch {kind} (device default batches)"
        budget = f", {self.max_tokens} tokens" if self.max_tokens else ""
        return f"semsearch {kind} (batch {self.batch_size}{budget})"

    def encoder(self, base: BiEncoder, model_path: Path) -> Encode:
        """An encode function for this variant, built from `base` (loaded in fp32)."""
        model = base
        if self.int8:
            model = BiEncoder.load(str(model_path), device="cpu", quantization="int8")

        def encode(texts: list[str]) -> np.ndarray:
            bi_encoder.PIN_MEMORY = self.pin
            try:
                return model.encode(texts, batch_size=self.batch_size,
                                    precision=self.precision,  # type: ignore[arg-type]
                                    max_batch_tokens=self.max_tokens)  # fmt: skip
            finally:
                bi_encoder.PIN_MEMORY = True

        return encode


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


def timed(encode: Encode, texts: list[str], gpu: bool) -> tuple[dict, np.ndarray]:
    """Wall and CPU seconds, peak host RSS and peak GPU memory of one run, and its vectors."""
    if gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    wall, cpu = time.perf_counter(), time.process_time()
    with PeakRss(every_s=0.05) as rss:
        vectors = encode(texts)
        if gpu:
            torch.cuda.synchronize()
    spent = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
             "peak_rss_mib": rss.peak / 2**20, "load_1min": os.getloadavg()[0]}  # fmt: skip
    if gpu:
        spent["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return spent, np.asarray(vectors, dtype=np.float32)


def mean_min_cosine(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    cosines = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cosines.mean()), float(cosines.min())


def flops_per_token(base: BiEncoder, mean_tokens: float) -> float:
    """Forward FLOPs per real token: the matrix products of every layer plus attention."""
    config = base.transformer.config
    hidden, inner = config.hidden_size, config.intermediate_size
    per_layer = 2 * (4 * hidden * hidden + 2 * hidden * inner) + 4 * hidden * mean_tokens
    return config.num_hidden_layers * per_layer


def row(label: str, batch: int, rounds: list[dict], texts: int, tokens: int) -> dict:
    """One table row: medians over `rounds` turned into rates."""
    median = statistics.median(spent["wall"] for spent in rounds)
    median_cpu = statistics.median(spent["cpu"] for spent in rounds)
    result = {"encoder": label, "batch_size": batch, "texts": texts, "tokens": tokens,
              "rounds": [{key: round(value, 3) for key, value in spent.items()} for spent in rounds],
              "median_seconds": round(median, 3), "texts_per_s": round(texts / median, 1),
              "tokens_per_s": round(tokens / median), "texts_per_cpu_s": round(texts / median_cpu, 1),
              "peak_rss_mib": round(max(spent["peak_rss_mib"] for spent in rounds))}  # fmt: skip
    if "peak_gpu_mib" in rounds[0]:
        result["peak_gpu_mib"] = round(max(spent["peak_gpu_mib"] for spent in rounds))
    return result


def compared_encoders(ours: BiEncoder, anchor, args) -> dict[str, Encode]:
    """The encoders of the alternating rounds, all at `--batch-size`."""

    def st(model) -> Encode:
        return lambda texts: model.encode(texts, batch_size=args.batch_size,
                                          normalize_embeddings=True, show_progress_bar=False,
                                          convert_to_tensor=True).float().cpu().numpy()  # fmt: skip

    encoders = {"semsearch": Variant(args.batch_size, None, args.precision).encoder(ours, args.model),
                ANCHOR: st(anchor)}  # fmt: skip
    if args.anchor_bf16:
        encoders[ANCHOR_BF16] = st(copy.deepcopy(anchor).to(torch.bfloat16))
    return encoders


def bench_corpus(name: str, texts: list[str], ours: BiEncoder, anchor, args) -> dict:
    """Alternating rounds of the compared encoders on `texts`, then each variant alone."""
    gpu = args.device == "cuda"
    tokens = sum(len(ids) for ids in ours.tokenize(texts))
    encoders = compared_encoders(ours, anchor, args)
    variants = {variant.label: variant for variant in args.variant}
    encoders.update({label: v.encoder(ours, args.model) for label, v in variants.items()})
    for encode in encoders.values():  # untimed: caches, allocators and kernels warm up
        encode(texts if args.full_warmup else texts[:WARMUP_TEXTS])
    rounds: dict[str, list[dict]] = {label: [] for label in encoders}
    vectors: dict[str, np.ndarray] = {}
    compared = [label for label in encoders if label not in variants]
    for round_number in range(args.repeats):
        order = compared if round_number % 2 == 0 else list(reversed(compared))
        for label in order + list(variants) * (round_number < args.variant_repeats):
            spent, vectors[label] = timed(encoders[label], texts, gpu)
            rounds[label].append(spent)
            print(f"  {name} round {round_number + 1}: {label} {spent}", flush=True)
    batches = {label: v.batch_size for label, v in variants.items()}
    rows = [row(label, batches.get(label, args.batch_size), rounds[label], len(texts), tokens)
            for label in encoders]  # fmt: skip
    anchor_rate = next(r for r in rows if r["encoder"] == ANCHOR)["texts_per_s"]
    anchor_cpu = next(r for r in rows if r["encoder"] == ANCHOR)["texts_per_cpu_s"]
    flops = flops_per_token(ours, tokens / len(texts))
    for entry in rows:
        entry["ratio_vs_st"] = round(entry["texts_per_s"] / anchor_rate, 3)
        entry["cpu_ratio_vs_st"] = round(entry["texts_per_cpu_s"] / anchor_cpu, 3)
        entry["cosine_mean"], entry["cosine_min"] = mean_min_cosine(
            vectors[entry["encoder"]], vectors[ANCHOR]
        )
        entry["model_tflops"] = round(flops * entry["tokens_per_s"] / 1e12, 3)
        entry["share_of_bf16_peak"] = round(entry["model_tflops"] / args.peak_tflops, 5)
    return {"rows": rows, "mean_tokens_per_text": round(tokens / len(texts), 1),
            "flops_per_token": flops}  # fmt: skip


def print_table(name: str, texts: int, result: dict, gpu: bool) -> None:
    print(f"\n{name}: {texts} texts, {result['mean_tokens_per_text']} tokens/text")
    headers = ["encoder", "median s", "texts/s", "tokens/s", "x ST", "x ST (CPU-s)",
               "cos mean", "cos min", "peak RSS MiB"]  # fmt: skip
    headers += ["peak GPU MiB", "model TFLOP/s", "share of bf16 peak"] if gpu else []
    lines = []
    for r in result["rows"]:
        line = [r["encoder"], r["median_seconds"], r["texts_per_s"], r["tokens_per_s"],
                r["ratio_vs_st"], r["cpu_ratio_vs_st"], f"{r['cosine_mean']:.6f}",
                f"{r['cosine_min']:.6f}", r["peak_rss_mib"]]  # fmt: skip
        line += [r["peak_gpu_mib"], r["model_tflops"], r["share_of_bf16_peak"]] if gpu else []
        lines.append(line)
    print(markdown_table(headers, lines), flush=True)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None,
                        help="model folder for both encoders (default: the bundled model)")  # fmt: skip
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--pypi-rows", type=int, default=20_000)
    parser.add_argument("--debian-rows", type=int, default=5_000)
    parser.add_argument("--batch-size", type=int, default=32, help="for both compared encoders")
    parser.add_argument("--precision", default="auto",
                        help="semsearch's precision in the compared rows (auto: bf16 on CUDA)")  # fmt: skip
    parser.add_argument("--anchor-bf16", action="store_true",
                        help="also time sentence-transformers with its weights in bf16")  # fmt: skip
    parser.add_argument("--variant", type=Variant.parse, action="append", default=[],
                        help="a semsearch-only row, e.g. b=1024,t=32768,p=bf16, b=default, b=32,nopin or "
                        "b=32,int8 (repeatable)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds per compared encoder")
    parser.add_argument("--variant-repeats", type=int, default=1, help="timed rounds per variant")
    parser.add_argument("--full-warmup", action="store_true",
                        help=f"warm up on the whole corpus, not its first {WARMUP_TEXTS} texts")  # fmt: skip
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    parser.add_argument("--peak-tflops", type=float, default=SPEC_BF16_PEAK_TFLOPS,
                        help="the GPU's dense bf16 peak, for the share-of-peak column")  # fmt: skip
    parser.add_argument("--name", default=None, help="result file name (without .json)")
    add_threads_option(parser)
    args = parser.parse_args()
    args.model = args.model or reference_model_path()
    set_threads(args.threads)
    env = environment()
    print(env, flush=True)
    file_name = args.name or "encode_throughput" + (
        f"_threads{args.threads}" if args.threads else ""
    )
    ours = BiEncoder.load(str(args.model), device=args.device)
    anchor = load_sentence_transformer(args.model, device=args.device)
    results = {}
    for name, texts in load_corpora(args.data_dir, args.pypi_rows, args.debian_rows).items():
        if name in args.corpora:
            results[name] = bench_corpus(name, texts, ours, anchor, args)
            print_table(name, len(texts), results[name], args.device == "cuda")
            # Written after each corpus, so a run stopped half-way keeps what it measured.
            payload = {"benchmark": "encode_throughput", "args": args_dict(args),
                       "environment": env, "load_average_after": list(os.getloadavg()),
                       "results": results}  # fmt: skip
            path = write_json(args.out_dir, file_name + ".json", payload)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
