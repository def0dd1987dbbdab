"""`bench pairs`: the most similar pair among n sentences, by cross-encoder and by bi-encoder.

A cross-encoder must read every one of the n(n-1)/2 pairs, which for 10,000 sentences is
about 50 million forward passes: far beyond a benchmark's time. So its throughput is
measured on random pairs of the same sentences (at least `min_pairs` of them and
`min_seconds` of scoring, after one untimed warm-up batch) and extrapolated to all pairs.
The bi-encoder is run end to end and timed: encode all n sentences, then mine the most
similar pairs with `semsearch.mining` (each sentence's `top_k` neighbours, by exact search
up to 100,000 sentences, so every pair's similarity is computed).
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from tqdm.auto import tqdm

from semsearch import __version__
from semsearch.ann.vector_index import prepare_vectors
from semsearch.bench.sentences import SentenceSet
from semsearch.errors import SemsearchError
from semsearch.mining import Collection, MiningOptions, mine_paraphrases
from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.cross_encoder import CrossEncoder

# The SBERT paper's figures, quoted for reference (Reimers & Gurevych, EMNLP 2019, section 1).
QUOTED = {
    "source": "Reimers & Gurevych, Sentence-BERT (EMNLP 2019), introduction",
    "n": 10_000,
    "hardware": "one V100 GPU",
    "cross_encoder": "about 65 hours (BERT, every pair through the network)",
    "bi_encoder": "about 5 seconds (SBERT embeddings + cosine similarity)",
}


@dataclass(frozen=True)
class PairsBenchOptions:
    """How long to sample the cross-encoder, what to mine with the bi-encoder, and batching."""

    min_pairs: int = 2_000
    min_seconds: float = 30.0
    top_k: int = 10
    top: int = 100
    batch_size: int = 64
    seed: int = 0

    def check(self) -> None:
        for name in ("min_pairs", "top_k", "top", "batch_size"):
            if getattr(self, name) < 1:
                flag = "--" + name.replace("_", "-")
                raise SemsearchError(f"{flag} must be at least 1, not {getattr(self, name)}")
        if self.min_seconds < 0:
            raise SemsearchError(f"--min-seconds must be 0 or more, not {self.min_seconds}")


@dataclass(frozen=True)
class CrossMeasure:
    """Random pairs scored by the cross-encoder and the time it took (no warm-up)."""

    pairs_scored: int
    seconds: float

    @property
    def pairs_per_second(self) -> float:
        return self.pairs_scored / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True)
class BiMeasure:
    """The bi-encoder's whole job, timed: encoding, then the pair search."""

    seconds: float
    encode_seconds: float
    search_seconds: float
    structure: str
    pairs_kept: int
    best_pair: dict[str, Any]


@dataclass(frozen=True)
class SizeResult:
    """Both methods on one set of n sentences."""

    n: int
    source: str
    cross: CrossMeasure
    bi: BiMeasure

    @property
    def all_pairs(self) -> int:
        return self.n * (self.n - 1) // 2

    @property
    def cross_all_seconds(self) -> float:
        """The cross-encoder's time for every pair, extrapolated from its measured rate."""
        return self.all_pairs / self.cross.pairs_per_second

    @property
    def speedup(self) -> float:
        return self.cross_all_seconds / self.bi.seconds if self.bi.seconds > 0 else float("inf")

    @property
    def exact(self) -> bool:
        return self.bi.structure.startswith("Flat")

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "source": self.source,
            "all_pairs": self.all_pairs,
            "cross_encoder": {
                **asdict(self.cross),
                "pairs_per_second": self.cross.pairs_per_second,
                "all_pairs_seconds": self.cross_all_seconds,
                "extrapolated": True,
            },
            "bi_encoder": {**asdict(self.bi), "measured": True, "exact_search": self.exact},
            "speedup": self.speedup,
        }


@dataclass
class PairsBenchResult:
    """Every size's figures, with the models, options and machine they were measured on."""

    sizes: list[SizeResult]
    cross_encoder: str
    bi_encoder: str
    options: PairsBenchOptions
    machine: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": "bench pairs",
            "semsearch_version": __version__,
            "cross_encoder": self.cross_encoder,
            "bi_encoder": self.bi_encoder,
            "options": asdict(self.options),
            "machine": self.machine,
            "sizes": [size.to_dict() for size in self.sizes],
            "quoted_sbert_paper": QUOTED,
        }


class TextCollection(Collection):
    """Sentences held in memory, encoded when the miner asks for their vectors."""

    def __init__(self, texts: list[str], encoder: BiEncoder, batch_size: int = 64) -> None:
        super().__init__(
            f"{len(texts)} sentences",
            pa.array(texts, pa.large_string()),
            pa.array(np.arange(len(texts))),
            "cosine",
        )
        self.encoder = encoder
        self.batch_size = batch_size
        self.encode_seconds = 0.0

    def vectors(self, rows: np.ndarray, show_progress: bool = False) -> np.ndarray:
        started = time.perf_counter()
        texts = self.texts.take(pa.array(rows)).to_pylist()
        vectors = self.encoder.encode(texts, self.batch_size, show_progress=show_progress)
        self.encode_seconds += time.perf_counter() - started
        return prepare_vectors(vectors, self.metric)


def run_pairs_bench(
    sets: list[SentenceSet],
    cross_encoder: CrossEncoder,
    bi_encoder: BiEncoder,
    options: PairsBenchOptions | None = None,
    progress: Callable[[str], None] | None = None,
    on_size: Callable[[PairsBenchResult], None] | None = None,
    show_progress: bool = False,
) -> PairsBenchResult:
    """Measure both methods on each sentence set, in order; see the module docstring.

    These runs take minutes: `progress` is told what is being measured, `show_progress`
    draws bars for the cross-encoder's sample and the bi-encoder's encoding and search, and
    `on_size` gets the result so far after each size (to write it, so an interruption
    loses less).
    """
    options = options or PairsBenchOptions()
    options.check()
    say = progress or (lambda message: None)
    result = PairsBenchResult([], cross_encoder.name, bi_encoder.name, options)
    load_before = _load_average()
    for number, texts in enumerate(sets, start=1):
        say(
            f"size {number} of {len(sets)}, n = {len(texts):,}: cross-encoder on random pairs "
            f"of {texts.source}"
        )
        cross = measure_cross_encoder(cross_encoder, texts.texts, options, show_progress)
        say(
            f"  {cross.pairs_scored:,} pairs in {cross.seconds:.1f} s; now the bi-encoder, "
            "encoding and searching every sentence"
        )
        bi = measure_bi_encoder(bi_encoder, texts.texts, options, show_progress)
        say(f"  encoded in {bi.encode_seconds:.1f} s, searched in {bi.search_seconds:.1f} s")
        result.sizes.append(SizeResult(len(texts), texts.source, cross, bi))
        result.machine = machine_facts(cross_encoder.device, load_before)
        if on_size is not None:
            on_size(result)
    return result


def measure_cross_encoder(
    model: CrossEncoder, texts: list[str], options: PairsBenchOptions, show_progress: bool = False
) -> CrossMeasure:
    """Score random pairs of `texts`, a chunk at a time, until both `min_pairs` and
    `min_seconds` are reached. The bar counts pairs, batch by batch, out of those the sample
    will take: the chunks `min_pairs` needs, or those `min_seconds` needs at the rate seen
    so far (the untimed warm-up's, then the sample's own). A bar of seconds stood at 100 %
    while the pairs `min_pairs` asks for were still being scored."""
    rng = np.random.default_rng(options.seed)
    chunk = min(1024, max(options.min_pairs, options.batch_size))
    warm_up = random_pairs(texts, options.batch_size, rng)
    started = time.perf_counter()
    model.predict(warm_up, options.batch_size)  # not in the figures: one-off costs
    per_pair = (time.perf_counter() - started) / len(warm_up)

    def chunks_needed(seconds_per_pair: float) -> int:
        for_time = options.min_seconds / (seconds_per_pair * chunk) if seconds_per_pair else 0
        return max(-(-options.min_pairs // chunk), math.ceil(for_time))

    scored, seconds = 0, 0.0
    with tqdm(
        total=chunks_needed(per_pair) * chunk,
        desc="cross-encoder sample",
        unit="pair",
        disable=not show_progress,
    ) as bar:
        while scored < options.min_pairs or seconds < options.min_seconds:
            pairs = random_pairs(texts, chunk, rng)
            started = time.perf_counter()
            model.predict(pairs, batch_size=options.batch_size, progress=bar.update)
            seconds += time.perf_counter() - started
            scored += len(pairs)
            # Once both are reached this is the chunks scored: the bar ends full.
            bar.total = max(chunks_needed(seconds / scored), scored // chunk) * chunk
            bar.refresh()
    return CrossMeasure(pairs_scored=scored, seconds=seconds)


def measure_bi_encoder(
    encoder: BiEncoder, texts: list[str], options: PairsBenchOptions, show_progress: bool = False
) -> BiMeasure:
    """Encode every text and mine the most similar pairs, timed end to end."""
    encoder.encode(texts[: options.batch_size], options.batch_size)  # warm-up, untimed
    collection = TextCollection(texts, encoder, options.batch_size)
    # FAISS searches beside the model: on the GPU where the model runs there (and FAISS can).
    faiss_device = "cpu" if encoder.device.type == "cpu" else "auto"
    mining = MiningOptions(
        top_k=options.top_k, top=options.top, device=faiss_device, show_progress=show_progress
    )
    started = time.perf_counter()
    result = mine_paraphrases(collection, mining)
    seconds = time.perf_counter() - started
    best = result.records(limit=1)
    return BiMeasure(
        seconds=seconds,
        encode_seconds=collection.encode_seconds,
        search_seconds=seconds - collection.encode_seconds,
        structure=result.stats.structure,
        pairs_kept=len(result),
        best_pair={key: best[0][key] for key in ("text_a", "text_b", "score")} if best else {},
    )


def random_pairs(texts: list[str], count: int, rng: np.random.Generator) -> list[tuple[str, str]]:
    """`count` pairs of two different texts, drawn uniformly (with replacement)."""
    first = rng.integers(len(texts), size=count)
    second = rng.integers(len(texts) - 1, size=count)
    second += second >= first  # skips the first text itself
    return [(texts[a], texts[b]) for a, b in zip(first, second)]


def machine_facts(device: torch.device, load_before: list[float]) -> dict[str, Any]:
    """What the figures depend on: the processor, threads, device, and how busy it was."""
    facts = {
        "device": str(device),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "load_average_before": load_before,
        "load_average_after": _load_average(),
    }
    if device.type == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(device)
    return facts


def _load_average() -> list[float]:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return []


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
