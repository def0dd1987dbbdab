"""Encoding throughput: semsearch's BiEncoder against sentence-transformers, same model and device.

Why: semsearch re-implements what sentence-transformers does (tokenise, transformer, mean
pooling, L2 normalisation), so it must be faster and give the same vectors. Two real
corpora: short PyPI summaries and long Debian descriptions (many cut at 256 tokens). Each
round times semsearch and sentence-transformers on the whole corpus at the same batch size,
alternating which goes first; figures are medians over rounds. Every row's vectors are
compared with sentence-transformers' fp32 vectors (goal: mean cosine >= 0.999, min >= 0.995).
`--variant` adds semsearch-only rows (batch size, token budget, precision) to see what pays.
On a GPU the rows also give peak GPU memory and the model's FLOP rate against the bf16 peak.

Issue 15's figures: `--st-references` (on by default with `--device cuda`) adds
sentence-transformers at its defaults (`encode(texts)`: batch 32, fp32 weights) and at its
fastest documented setting (bf16 weights, `--st-fastest-batch` rows per batch); each corpus
then appends one JSON line to `results/encode_throughput.jsonl` with semsearch's best row
(texts/s, ratios to both, cosines, share of the bf16 peak); `suite.py table` sets it beside the goals.
`--random-base-model` times a randomly initialised BERT-base-shaped model (all-mpnet-base-v2's
shape) that both encoders load, for its FLOP utilisation; a `pack` variant times packed
sequences (`BiEncoder.encode(..., packing=True)`).

    python benchmarks/encode_throughput.py --device cuda --model /tmp/model --data-dir .gpu/data \
        --pypi-rows 100000 --debian-rows 20000 --batch-size 256 --variant b=default \
        --variant b=default,pack --repeats 3
"""

from __future__ import annotations

import argparse
import atexit
import copy
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from common import (
    PeakRss,
    add_encode_options,
    add_options,
    add_results_option,
    add_threads_option,
    base_parser,
    cosine_stats,
    encode_corpora,
    environment,
    load_sentence_transformer,
    random_base_model,
    record,
    reference_model_path,
    set_threads,
    st_encode,
)

from semsearch.models import BiEncoder, bi_encoder

WARMUP_TEXTS = 2_000
CORPORA = ("pypi_summaries", "debian_long")
ANCHOR = "sentence-transformers"
ANCHOR_BF16 = "sentence-transformers bf16"
ST_DEFAULT = "sentence-transformers defaults (batch 32, fp32)"
ST_DEFAULT_BATCH = 32
COSINE_GOALS = (0.999, 0.995)  # mean, min against sentence-transformers' fp32 vectors
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
    packing: bool = False

    @classmethod
    def parse(cls, text: str) -> Variant:
        """`b=512,t=32768,p=bf16` (t and p optional; b=default for the device's); `b=32,int8`;
        `pack` packs the sequences (no padding work)."""
        fields = dict(part.split("=") if "=" in part else (part, "1") for part in text.split(","))
        batch = None if fields["b"] == "default" else int(fields["b"])
        return cls(
            batch_size=batch,
            max_tokens=int(fields["t"]) if "t" in fields else None,
            precision=fields.get("p", "auto"),
            int8="int8" in fields,
            pin="nopin" not in fields,
            packing="pack" in fields,
        )

    @property
    def label(self) -> str:
        kind = f"{self.precision}{' int8' if self.int8 else ''}{'' if self.pin else ' unpinned'}"
        kind += " packed" if self.packing else ""
        if self.batch_size is None:
            return f"semsearch {kind} (device default batches)"
        budget = f", {self.max_tokens} tokens" if self.max_tokens else ""
        return f"semsearch {kind} (batch {self.batch_size}{budget})"

    def encoder(self, base: BiEncoder, model_path: Path) -> Encode:
        """An encode function for this variant, built from `base` (loaded in fp32)."""
        model = base
        if self.int8:
            model = BiEncoder.load(str(model_path), device="cpu", quantization="int8")

        packing = {"packing": True} if self.packing else {}

        def encode(texts: list[str]) -> np.ndarray:
            bi_encoder.PIN_MEMORY = self.pin
            try:
                return model.encode(
                    texts,
                    batch_size=self.batch_size,
                    precision=self.precision,  # type: ignore[arg-type]
                    max_batch_tokens=self.max_tokens,
                    **packing,
                )
            finally:
                bi_encoder.PIN_MEMORY = True

        return encode


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
    spent = {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "peak_rss_mib": rss.peak / 2**20,
        "load_1min": os.getloadavg()[0],
    }
    if gpu:
        spent["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return spent, np.asarray(vectors, dtype=np.float32)


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
    result = {
        "encoder": label,
        "batch_size": batch,
        "texts": texts,
        "tokens": tokens,
        "rounds": [{key: round(value, 3) for key, value in spent.items()} for spent in rounds],
        "median_seconds": round(median, 3),
        "texts_per_s": round(texts / median, 1),
        "tokens_per_s": round(tokens / median),
        "texts_per_cpu_s": round(texts / median_cpu, 1),
        "peak_rss_mib": round(max(spent["peak_rss_mib"] for spent in rounds)),
    }
    if "peak_gpu_mib" in rounds[0]:
        result["peak_gpu_mib"] = round(max(spent["peak_gpu_mib"] for spent in rounds))
    return result


def compared_encoders(ours: BiEncoder, anchor, args) -> dict[str, Encode]:
    """The encoders of the alternating rounds, all at `--batch-size`."""

    def st(model, batch_size: int = args.batch_size) -> Encode:
        return lambda texts: st_encode(model, texts, batch_size)

    encoders = {
        "semsearch": Variant(args.batch_size, None, args.precision).encoder(ours, args.model),
        ANCHOR: st(anchor),
    }
    if args.anchor_bf16:
        encoders[ANCHOR_BF16] = st(copy.deepcopy(anchor).to(torch.bfloat16))
    if args.st_references:
        if args.st_defaults:  # as a user calls it: `encode(texts)` (the cosines need no norm)
            encoders[ST_DEFAULT] = lambda texts: anchor.encode(texts, show_progress_bar=False)
        fastest = copy.deepcopy(anchor).to(torch.bfloat16)
        encoders[st_fastest_label(args)] = st(fastest, args.st_fastest_batch)
    return encoders


def st_fastest_label(args) -> str:
    return f"sentence-transformers fastest (bf16 weights, batch {args.st_fastest_batch})"


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
    batches[ST_DEFAULT] = ST_DEFAULT_BATCH
    batches[st_fastest_label(args)] = args.st_fastest_batch
    rows = [
        row(label, batches.get(label, args.batch_size), rounds[label], len(texts), tokens)
        for label in encoders
    ]
    anchor_rate = next(r for r in rows if r["encoder"] == ANCHOR)["texts_per_s"]
    anchor_cpu = next(r for r in rows if r["encoder"] == ANCHOR)["texts_per_cpu_s"]
    flops = flops_per_token(ours, tokens / len(texts))
    for entry in rows:
        entry["ratio_vs_st"] = round(entry["texts_per_s"] / anchor_rate, 3)
        entry["cpu_ratio_vs_st"] = round(entry["texts_per_cpu_s"] / anchor_cpu, 3)
        entry["cosine_mean"], entry["cosine_min"] = cosine_stats(
            vectors[entry["encoder"]], vectors[ANCHOR]
        )
        entry["model_tflops"] = round(flops * entry["tokens_per_s"] / 1e12, 3)
        entry["share_of_bf16_peak"] = round(entry["model_tflops"] / args.peak_tflops, 5)
    return {
        "rows": rows,
        "mean_tokens_per_text": round(tokens / len(texts), 1),
        "flops_per_token": flops,
    }


def figure_line(name: str, result: dict, args) -> dict:
    """Issue 15's JSON line for one corpus: semsearch's best row against both references.

    The best row is the fastest semsearch row whose vectors meet the cosine goals (the
    fastest of all if none does; `cosines_meet_goal` then says so)."""
    rows = {r["encoder"]: r for r in result["rows"]}
    ours = [r for label, r in rows.items() if label.startswith("semsearch")]
    good = [
        r
        for r in ours
        if r["cosine_mean"] >= COSINE_GOALS[0] and r["cosine_min"] >= COSINE_GOALS[1]
    ]
    best = max(good or ours, key=lambda r: r["texts_per_s"])
    fastest = st_fastest_label(args)
    if ST_DEFAULT not in rows and args.batch_size == ST_DEFAULT_BATCH:
        rows[ST_DEFAULT] = rows[ANCHOR]  # the compared anchor then runs at st's defaults

    def ratio(label: str) -> float | None:
        return round(best["texts_per_s"] / rows[label]["texts_per_s"], 3) if label in rows else None

    gpu = args.device == "cuda"
    return {
        "corpus": name,
        "model": args.model_label,
        "texts": best["texts"],
        "mean_tokens_per_text": result["mean_tokens_per_text"],
        "texts_per_s": best["texts_per_s"],
        "semsearch_config": best["encoder"],
        "ratio_st_default": ratio(ST_DEFAULT),
        "st_default": ST_DEFAULT,
        "st_default_texts_per_s": rows.get(ST_DEFAULT, {}).get("texts_per_s"),
        "ratio_st_fastest": ratio(fastest),
        "st_fastest": fastest if fastest in rows else None,
        "st_fastest_texts_per_s": rows.get(fastest, {}).get("texts_per_s"),
        "mean_cos": round(best["cosine_mean"], 6),
        "min_cos": round(best["cosine_min"], 6),
        "cosines_meet_goal": bool(good),
        "model_tflops": best["model_tflops"] if gpu else None,
        "flop_utilisation": best["share_of_bf16_peak"] if gpu else None,
        "peak_tflops": args.peak_tflops if gpu else None,
        "run": args.name,
        "rows": result["rows"],
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_encode_options(parser, pypi_rows=20_000, debian_rows=5_000)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    add_options(
        parser,
        precision=("auto", "semsearch's precision in the compared rows (auto: bf16 on CUDA)"),
        anchor_bf16=(False, "also time sentence-transformers with its weights in bf16"),
    )
    parser.add_argument(
        "--variant",
        type=Variant.parse,
        action="append",
        default=[],
        help="a semsearch-only row, e.g. b=1024,t=32768,p=bf16, b=default, b=32,nopin or "
        "b=32,int8 (repeatable)",
    )
    add_options(
        parser,
        repeats=(2, "timed rounds per compared encoder"),
        variant_repeats=(1, "timed rounds per variant"),
        full_warmup=(False, f"warm up on the whole corpus, not its first {WARMUP_TEXTS} texts"),
    )
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    add_options(
        parser,
        peak_tflops=(
            SPEC_BF16_PEAK_TFLOPS,
            "the GPU's dense bf16 peak, for the share-of-peak column",
        ),
        name=(str, "a label for this run, kept in its lines"),
    )
    parser.add_argument(
        "--st-references",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time sentence-transformers at its defaults and at its fastest "
        "setting, for the JSON lines' ratios (default: on with --device cuda)",
    )
    parser.add_argument(
        "--st-defaults",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --st-references, also time its defaults (batch 32, fp32: the "
        "slowest row; the one-call GPU suite leaves it out)",
    )
    add_options(
        parser,
        st_fastest_batch=(
            512,
            "batch size of sentence-transformers' fastest reference (bf16 weights)",
        ),
        random_base_model=(
            False,
            "time a randomly initialised BERT-base-shaped model instead of --model "
            "(built with the --model's tokenizer in a temporary folder)",
        ),
    )
    add_results_option(parser)
    add_threads_option(parser)
    args = parser.parse_args()
    if args.st_references is None:
        args.st_references = args.device == "cuda"
    args.model = Path(args.model or reference_model_path())
    args.model_label = str(args.model)
    if args.random_base_model:
        scratch = Path(tempfile.mkdtemp(prefix="semsearch-random-base-"))
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        args.model = random_base_model(args.model, scratch / "model")
        args.model_label = "random BERT-base shape (12 layers, 768 hidden, 12 heads, 3072 inner)"
    set_threads(args.threads)
    env = environment()
    print(env, flush=True)
    ours = BiEncoder.load(str(args.model), device=args.device)
    anchor = load_sentence_transformer(args.model, device=args.device)
    results = {}
    for name, texts in encode_corpora(args).items():
        if name in args.corpora:
            results[name] = bench_corpus(name, texts, ours, anchor, args)
            for entry in results[name]["rows"]:
                print(name, {key: value for key, value in entry.items() if key != "rounds"})
            line = figure_line(name, results[name], args)
            # One line per corpus, so a run stopped half-way keeps what it measured.
            record(args, "encode_throughput", line, args.device)


if __name__ == "__main__":
    main()
