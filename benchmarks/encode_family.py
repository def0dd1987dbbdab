"""The encode family: texts/s of encoders against sentence-transformers' on the same texts.

`in_process` (`encode_throughput`) runs semsearch's `BiEncoder` and sentence-transformers in
alternating rounds in one process (medians), with every row's cosines to sentence-transformers'
fp32 vectors; `runtimes_family.py` gives each CPU candidate a process of its own.

    python benchmarks/runner.py run encode_throughput --set device=cuda model=/tmp/model
"""

from __future__ import annotations

import atexit
import copy
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import (
    PeakRss,
    corpus_texts,
    cosine_stats,
    load_sentence_transformer,
    random_base_model,
    reference_model_path,
    st_encode,
)

WARMUP_TEXTS = 2_000
ANCHOR = "sentence-transformers"
ANCHOR_BF16 = "sentence-transformers bf16"
ST_DEFAULT = "sentence-transformers defaults (batch 32, fp32)"
ST_DEFAULT_BATCH = 32
COSINE_GOALS = (0.999, 0.995)  # mean, min against sentence-transformers' fp32 vectors
Encode = Callable[[list[str]], np.ndarray]


def corpora(context) -> dict[str, list[str]]:
    """The first `pypi_rows` PyPI summaries and `debian_rows` Debian long descriptions."""
    p = context.params
    return {
        "pypi_summaries": corpus_texts(context.data_dir, "pypi", p["pypi_rows"]),
        "debian_long": corpus_texts(context.data_dir, "debian", p["debian_rows"]),
    }


@dataclass(frozen=True)
class Variant:
    """One way to run semsearch: rows per batch (None: the device's default), a token budget,
    a precision (`bf16`/`fp16` cast the weights), int8 dynamic quantisation (CPU), packing."""

    batch_size: int | None
    max_tokens: int | None = None
    precision: str = "auto"
    int8: bool = False
    pin: bool = True
    packing: bool = False

    @classmethod
    def parse(cls, text: str) -> Variant:
        """`b=512,t=32768,p=bf16` (b=default: the device's); flags `int8`, `nopin`, `pack`."""
        fields = dict(part.split("=") if "=" in part else (part, "1") for part in text.split(","))
        return cls(
            batch_size=None if fields["b"] == "default" else int(fields["b"]),
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

    def encoder(self, base, model_path: Path) -> Encode:
        """An encode function for this variant, built from `base` (loaded in fp32)."""
        from semsearch.models import BiEncoder, bi_encoder

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
    import torch

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


def in_process(context) -> Iterator[dict]:
    """`encode_throughput`: one line per corpus, each appended as soon as it is measured (a
    run stopped half-way keeps what it measured)."""
    from semsearch.models import BiEncoder

    p = context.params
    if p["st_references"] is None:
        p["st_references"] = p["device"] == "cuda"
    p["model"] = Path(p["model"] or reference_model_path())
    model_label = str(p["model"])
    if p["random_base_model"]:
        scratch = Path(tempfile.mkdtemp(prefix="semsearch-random-base-"))
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        p["model"] = random_base_model(p["model"], scratch / "model")
        model_label = "random BERT-base shape (12 layers, 768 hidden, 12 heads, 3072 inner)"
    ours = BiEncoder.load(str(p["model"]), device=p["device"])
    anchor = load_sentence_transformer(p["model"], device=p["device"])
    for name, texts in corpora(context).items():
        if name in p["corpora"]:
            result = bench_corpus(name, texts, ours, anchor, p)
            for entry in result["rows"]:
                print(name, {key: value for key, value in entry.items() if key != "rounds"})
            yield {"corpus": name, "model": model_label, **best_line(result, p)}


def st_fastest_label(p: dict) -> str:
    return f"sentence-transformers fastest (bf16 weights, batch {p['st_fastest_batch']})"


def compared_encoders(ours, anchor, p: dict) -> dict[str, Encode]:
    """The encoders of the alternating rounds, all at `batch_size`."""
    import torch

    def st(model, batch_size: int = p["batch_size"]) -> Encode:
        return lambda texts: st_encode(model, texts, batch_size)

    encoders = {
        "semsearch": Variant(p["batch_size"], None, p["precision"]).encoder(ours, p["model"]),
        ANCHOR: st(anchor),
    }
    if p["anchor_bf16"]:
        encoders[ANCHOR_BF16] = st(copy.deepcopy(anchor).to(torch.bfloat16))
    if p["st_references"]:
        if p["st_defaults"]:  # as a user calls it: `encode(texts)` (the cosines need no norm)
            encoders[ST_DEFAULT] = lambda texts: anchor.encode(texts, show_progress_bar=False)
        fastest = copy.deepcopy(anchor).to(torch.bfloat16)
        encoders[st_fastest_label(p)] = st(fastest, p["st_fastest_batch"])
    return encoders


def bench_corpus(name: str, texts: list[str], ours, anchor, p: dict) -> dict:
    """Alternating rounds of the compared encoders on `texts`, then each variant alone."""
    gpu = p["device"] == "cuda"
    tokens = sum(len(ids) for ids in ours.tokenize(texts))
    encoders = compared_encoders(ours, anchor, p)
    variants = {v.label: v for v in map(Variant.parse, p["variant"])}
    encoders.update({label: v.encoder(ours, p["model"]) for label, v in variants.items()})
    for encode in encoders.values():  # untimed: caches, allocators and kernels warm up
        encode(texts if p["full_warmup"] else texts[:WARMUP_TEXTS])
    rounds: dict[str, list[dict]] = {label: [] for label in encoders}
    vectors: dict[str, np.ndarray] = {}
    compared = [label for label in encoders if label not in variants]
    for number in range(p["repeats"]):
        order = compared if number % 2 == 0 else compared[::-1]
        for label in order + list(variants) * (number < p["variant_repeats"]):
            spent, vectors[label] = timed(encoders[label], texts, gpu)
            rounds[label].append(spent)
            print(f"  {name} round {number + 1}: {label} {spent}", flush=True)
    batches = {label: v.batch_size for label, v in variants.items()}
    batches.update({ST_DEFAULT: ST_DEFAULT_BATCH, st_fastest_label(p): p["st_fastest_batch"]})
    rows = [
        row(label, batches.get(label, p["batch_size"]), rounds[label], len(texts), tokens)
        for label in encoders
    ]
    anchor_row = next(r for r in rows if r["encoder"] == ANCHOR)
    config = ours.transformer.config  # forward FLOPs per real token: matrix products, attention
    hidden, inner = config.hidden_size, config.intermediate_size
    layer = 2 * (4 * hidden * hidden + 2 * hidden * inner) + 4 * hidden * tokens / len(texts)
    flops = config.num_hidden_layers * layer
    for entry in rows:
        entry["ratio_vs_st"] = round(entry["texts_per_s"] / anchor_row["texts_per_s"], 3)
        entry["cpu_ratio_vs_st"] = round(
            entry["texts_per_cpu_s"] / anchor_row["texts_per_cpu_s"], 3
        )
        entry["cosine_mean"], entry["cosine_min"] = cosine_stats(
            vectors[entry["encoder"]], vectors[ANCHOR]
        )
        entry["model_tflops"] = round(flops * entry["tokens_per_s"] / 1e12, 3)
        entry["share_of_bf16_peak"] = round(entry["model_tflops"] / p["peak_tflops"], 5)
    return {
        "rows": rows,
        "mean_tokens_per_text": round(tokens / len(texts), 1),
        "flops_per_token": flops,
    }


def best_line(result: dict, p: dict) -> dict:
    """Issue 15's figures for one corpus: the fastest semsearch row whose vectors meet the
    cosine goals (the fastest of all if none does; `cosines_meet_goal` then says so)."""
    rows = {r["encoder"]: r for r in result["rows"]}
    ours = [r for label, r in rows.items() if label.startswith("semsearch")]
    good = [
        r
        for r in ours
        if r["cosine_mean"] >= COSINE_GOALS[0] and r["cosine_min"] >= COSINE_GOALS[1]
    ]
    best = max(good or ours, key=lambda r: r["texts_per_s"])
    fastest = st_fastest_label(p)
    if ST_DEFAULT not in rows and p["batch_size"] == ST_DEFAULT_BATCH:
        rows[ST_DEFAULT] = rows[ANCHOR]  # the compared anchor then runs at st's defaults

    def ratio(label: str) -> float | None:
        return round(best["texts_per_s"] / rows[label]["texts_per_s"], 3) if label in rows else None

    gpu = p["device"] == "cuda"
    return {
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
        "peak_tflops": p["peak_tflops"] if gpu else None,
        "run": p["name"],
        "rows": result["rows"],
    }
