"""Which precision a long-running server should encode queries in, measured on its own CPU.

Why: on a CPU with native bf16 arithmetic (AVX512-BF16, AMX) a bf16 copy of MiniLM encodes
short queries about 2.7x faster than fp32, and its vectors stay within cosine 0.9999 of the
fp32 ones the index was built from (measured on STS-B sentences: mean 0.99995, minimum
0.99987), so search results do not change in any way a user could see. On a CPU without it,
bf16 is emulated and slower. Rather than guess from CPU flags, `auto` encodes a probe batch
both ways at start-up and keeps bf16 only when it is both close and clearly faster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from semsearch.errors import SemsearchError
from semsearch.options import QUERY_PRECISIONS

if TYPE_CHECKING:
    from semsearch.models.bi_encoder import BiEncoder

log = logging.getLogger(__name__)

# bf16 is kept when every probe vector is this close to fp32's and it is this much faster.
MIN_COSINE = 0.9995
MIN_SPEEDUP = 1.25
PROBE_BATCH = 8
# Queries up to this many tokens (about 250 characters of English) get their bf16 kernels
# compiled at start-up; longer ones compile on first use.
WARM_TOKENS = 64
PROBE_TEXTS = (
    "how do I read a parquet file in python",
    "a library for parsing command line arguments",
    "fast approximate nearest neighbour search over dense vectors",
    "tools to edit photos and images",
    "play chess against the computer",
    "encrypt my backups before uploading them to the cloud",
    "A man is playing a guitar on the stage while the crowd sings along.",
    "A woman slices a tomato.",
    "HTTP client with connection pooling, retries and timeouts for asyncio applications",
    "plot",
    "Two dogs run through a field of tall grass near a river on a sunny afternoon.",
    "convert markdown documents to html and pdf",
    "unit testing framework",
    "The stock market fell sharply after the central bank raised interest rates again.",
    "machine learning models for text classification and named entity recognition",
    "read and write excel spreadsheets",
)


def choose_query_precision(encoder: BiEncoder, requested: str = "auto") -> str:
    """`fp32` or `bf16`: `requested` when it is one of them, else what the probe measures.

    Only a CPU encoder without quantisation has a choice: CUDA already runs bf16, and an
    int8 encoder runs its own kernels in fp32.
    """
    if requested not in QUERY_PRECISIONS:
        raise SemsearchError(
            f"unknown query precision {requested!r}: use {', '.join(QUERY_PRECISIONS)}"
        )
    if encoder.device.type != "cpu" or encoder.quantization:
        if requested == "bf16" and encoder.quantization:
            raise SemsearchError(
                f"an {encoder.quantization} encoder runs in fp32: drop --precision bf16"
            )
        return "auto" if encoder.device.type != "cpu" else "fp32"
    if requested != "auto":
        return requested
    from semsearch.models.openvino_runtime import cosine_agreement  # torch: a BiEncoder's here

    texts = list(PROBE_TEXTS)
    full = encoder.encode(texts, batch_size=PROBE_BATCH, precision="fp32")
    half = encoder.encode(texts, batch_size=PROBE_BATCH, precision="bf16")
    cosine = cosine_agreement(half, full)[1]
    full_s = _best_time(encoder, texts, "fp32")
    half_s = _best_time(encoder, texts, "bf16")
    chosen = "bf16" if cosine >= MIN_COSINE and full_s >= MIN_SPEEDUP * half_s else "fp32"
    log.info(
        "query precision %s: bf16 %.1fx the speed of fp32 on this CPU, vectors within cosine %.5f",
        chosen,
        full_s / half_s,
        cosine,
    )
    return chosen


def warm_steps(encoder: BiEncoder, max_batch: int, max_tokens: int = WARM_TOKENS) -> Iterator[None]:
    """Encode once at every (batch, length) shape that queries of up to `max_tokens` tokens
    produce, one encode a step (a server runs them between batches).

    Why: oneDNN compiles a bf16 kernel (and reorders the weights) for each matrix shape it
    meets and keeps them in a bounded cache. Left to the traffic, that cache fills during
    the first minutes of serving: RSS grew by 310 MB over a 10-minute soak after a 1-minute
    warm-up, and the first query of each new shape waited for the compiler. Part of the
    cache is per thread, so each encoder worker warms its own.
    """
    for tokens in range(3, max_tokens + 1):
        longest = " ".join(["a"] * (tokens - 2))  # one token per word, plus [CLS] and [SEP]
        shorter = " ".join(["a"] * max(tokens - 3, 1))
        for batch in range(1, max_batch + 1):
            # One text of the full length and shorter ones: padded, as real groups are.
            encoder.encode([longest] + [shorter] * (batch - 1), batch_size=batch, precision="bf16")
            yield


def _best_time(encoder: BiEncoder, texts: list[str], precision: str, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        encoder.encode(texts, batch_size=PROBE_BATCH, precision=precision)  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - started)
    return best
