"""The names and defaults a user chooses from, kept free of heavy imports.

Why a module of its own: `semsearch --help` shows these in every command's options, and
it must answer without importing torch, transformers or FAISS (seconds on a small
machine). The modules that act on them import them from here, so each fact has one home.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from semsearch.errors import SemsearchError

# Training objectives (semsearch.losses has one module per objective).
Objective = Literal[
    "softmax",
    "bce",
    "cosine",
    "cosent",
    "triplet",
    "contrastive",
    "online-contrastive",
    "mnr",
    "l1-sigmoid",
    "malstm",
]
OBJECTIVES: tuple[str, ...] = get_args(Objective)
# How training examples are formed from scored pairs, and how dev data is measured.
Formation = Literal["none", "positives", "triplets", "binary"]
FORMATIONS: tuple[str, ...] = get_args(Formation)
DevTask = Literal["auto", "sts", "pairs", "ir"]
DEV_TASKS: tuple[str, ...] = get_args(DevTask)
# The objectives a cross-encoder trains with, and the metrics its runs report.
CROSS_OBJECTIVES = ("bce", "softmax")
CROSS_METRICS = ("spearman", "pearson", "ap", "accuracy")

# What a search of a chunked index returns: one hit per document (by its best chunk), or chunks.
Group = Literal["documents", "chunks"]
GROUPS: tuple[str, ...] = get_args(Group)

# The metrics an index's vectors are compared by (FAISS scores the first two by inner product).
METRIC_NAMES = ("cosine", "dot", "l2", "manhattan")

# The similarity functions STS and pair evaluations report side by side.
Similarity = Literal["cosine", "dot", "euclidean", "manhattan"]
SIMILARITIES: tuple[str, ...] = get_args(Similarity)

# A fixed nprobe that suits 20k vectors loses a sixth of the neighbours at 300k (measured:
# recall@10 0.84 at nprobe 32 on IVF2048), so approximate indexes are tuned by default.
DEFAULT_TARGET_RECALL = 0.95
DEFAULT_TUNING_QUERIES = 1000

# Candidates the bi-encoder retrieves per query for a cross-encoder to re-order.
DEFAULT_RERANK_TOP = 100

# The shared data folder beside the project (STS-B, PyPI summaries) that benchmarks read.
DEFAULT_DATA_DIR = Path("../shared/data")

# The precision a model runs in (`auto`: bf16 weights on a GPU, fp32 on a CPU).
Precision = Literal["auto", "fp32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)

# What runs the encoder: `auto` (the default) is an exported copy on OpenVINO on a CPU
# (semsearch.models.openvino_runtime; checked against torch, torch where it cannot run) and
# torch on a GPU; `openvino` asks for the export, `torch` for torch alone.
Runtime = Literal["auto", "torch", "openvino"]
RUNTIMES: tuple[str, ...] = get_args(Runtime)


def check_runtime(runtime: str) -> None:
    """Refuse an unknown runtime in one line (int8 runs on OpenVINO only: `openvino_int8`)."""
    if runtime not in RUNTIMES:
        raise SemsearchError(f"unknown runtime {runtime!r}: use {', '.join(RUNTIMES)}")


# How a server encodes queries on a CPU (semsearch.models.query_precision measures `auto`).
QueryPrecision = Literal["auto", "fp32", "bf16"]
QUERY_PRECISIONS: tuple[str, ...] = get_args(QueryPrecision)

# Query modes: the vectors, the BM25 index beside them, or both fused (semsearch.search.hybrid).
SearchMode = Literal["dense", "lexical", "hybrid"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
# How hybrid fuses the two rankings: `adaptive` (the default: a convex combination whose
# lexical weight shrinks where BM25's top scores are flat, semsearch.search.hybrid), reciprocal
# rank fusion (ranks only, k=60 as in Cormack et al. 2009), or a convex combination of
# min-max normalised scores weighted by alpha.
FusionMethod = Literal["adaptive", "rrf", "convex"]
FUSION_METHODS: tuple[str, ...] = get_args(FusionMethod)
DEFAULT_FUSION: FusionMethod = "adaptive"
DEFAULT_RRF_K = 60
# The dense side's weight in convex fusion (tune it with `eval ir --tune-alpha`), and in
# adaptive fusion where BM25 is most confident (elsewhere more).
DEFAULT_ALPHA = 0.5
HYBRID_DEPTH = 100  # candidates each side contributes to the fusion (at least k)

# Long texts cut into chunks that fit the model's window (semsearch.ingest.chunking): `auto`
# lets the build decide, `on` cuts every text longer than the window, `off` keeps only each
# text's first window of tokens, as before chunking.
ChunkingMode = Literal["auto", "on", "off"]
CHUNKING_MODES: tuple[str, ...] = get_args(ChunkingMode)
# A chunk's tokens and the tokens consecutive chunks may share (whole sentences or words),
# chosen on benchmarks/long_documents.py: 64 and 8 found the right man page more often than
# 128/16 or the whole window (254/32), for questions within and past a page's first window.
DEFAULT_CHUNK_TOKENS = 64
DEFAULT_CHUNK_OVERLAP = 8


def check_choice(name: str, value: str, choices: tuple[str, ...], where: str = "") -> None:
    """Refuse a value outside `choices` in one line that lists them (`where` prefixes it)."""
    if value not in choices:
        prefix = f"{where}: " if where else ""
        raise SemsearchError(
            f"{prefix}unknown {name} {value!r}: choose one of {', '.join(choices)}"
        )
