"""Long documents: one vector from the first window, against chunks, on Linux manual pages.

Variants: `truncation` (one vector a page), `best_chunk` (`semsearch build --chunking on`,
ranked by the best chunk) and `mean_chunks` (the mean of chunk vectors); recall@10 and nDCG@10
of first-window and past-window queries, build time, size and the encoder's tokens/s.

    python benchmarks/prepare_long_documents.py        # once: the data (see its docstring)
    python benchmarks/long_documents.py --synthetic 40 --out-dir /tmp/ld   # seconds
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import (
    add_threads_option,
    args_dict,
    base_parser,
    record,
    semsearch_cli,
    set_threads,
)

from semsearch.evaluation.ir import exact_search, ir_metrics
from semsearch.evaluation.similarity import normalize_rows
from semsearch.models import BiEncoder
from semsearch.models.encoder import TokenizedTexts
from semsearch.models.model_folder import resolve_model
from semsearch.store.folders import IndexFolder

K = 10
KINDS = ("first_window", "past_window")


@dataclass
class LongDocuments:
    """The pages (`ids`, `texts`, in one order) and the queries, with their gold page."""

    ids: list[str]
    texts: list[str]
    parquet: Path
    queries: list[dict]


@dataclass
class Variant:
    """One way of searching: the top pages per query, and what building it cost."""

    rankings: list[list[str]]
    build_s: float
    index_bytes: int
    vectors: int
    encode: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Chunks:
    """Token windows of many texts: the ids each window encodes (with [CLS] and [SEP]),
    its text's span (to show the passage that matched) and which text it is from."""

    token_ids: list[list[int]]
    spans: list[tuple[int, int]]
    owners: np.ndarray


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--chunk-tokens", type=int, default=66, help="a window, with [CLS]/[SEP]")
    parser.add_argument("--chunk-overlap", type=int, default=8)
    parser.add_argument("--documents", type=int, default=0, help="a seeded subset (0: all)")
    parser.add_argument("--synthetic", type=int, default=0, help="N generated pages instead")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.synthetic:
        data = synthetic_documents(args.out_dir / "synthetic", args.synthetic, args.model)
    else:
        data = read_long_documents(args.data_dir / "long_documents", args.documents)
    line = run(args, data)
    for name, figures in line["variants"].items():
        print(name, {key: value for key, value in figures.items() if key != "encode"})
    record(args, "long_documents", line, device=args.device)


def run(args, data: LongDocuments) -> dict:
    encoder = BiEncoder.load(args.model, device=args.device)
    tokenizer = load_tokenizer(args.model)
    encoder.encode(data.texts[:4], batch_size=args.batch_size)  # warm: runtime export, caches
    queries = encoder.encode([q["query"] for q in data.queries], batch_size=args.batch_size)
    if not 2 < args.chunk_tokens <= encoder.max_length:
        raise SystemExit(f"--chunk-tokens must be 3 to the model's {encoder.max_length}")
    chunk_window = args.chunk_tokens - 2
    truncation = truncation_variant(encoder, data, queries, args.batch_size)
    chunk_vectors, chunks, chunk_build = encode_chunks(
        encoder, tokenizer, data.texts, chunk_window, args.chunk_overlap, args.batch_size
    )
    built = best_chunk_by_semsearch(args, data)
    best, extra = built["dense"], {"best_chunk_hybrid": built["hybrid"]}
    mean = mean_chunks_variant(data, queries, chunk_vectors, chunks, chunk_build)
    variants = {"truncation": truncation, "best_chunk": best, "mean_chunks": mean, **extra}
    quality = {name: by_kind(variant.rankings, data.queries) for name, variant in variants.items()}
    figures = {
        name: {
            **quality[name],
            "build_s": round(variant.build_s, 2),
            "index_bytes": variant.index_bytes,
            "vectors": variant.vectors,
            **({"encode": variant.encode} if variant.encode else {}),
        }
        for name, variant in variants.items()
    }
    ratio = chunk_build["tokens_per_s"] / truncation.encode["tokens_per_s"]
    line = {
        "data": "synthetic" if args.synthetic else "manpages",
        "documents": len(data.ids),
        "queries": {kind: sum(q["where"] == kind for q in data.queries) for kind in KINDS},
        "document_tokens": int(sum(len(ids) for ids in tokenize_all(tokenizer, data.texts))),
        "model": args.model,
        "chunker": "semsearch",
        "chunk_tokens": args.chunk_tokens,
        "chunk_overlap": args.chunk_overlap,
        "chunks": best.vectors or len(chunks.token_ids),
        "variants": figures,
        "tokens_per_s_ratio": round(ratio, 3),
        "first_window_gap": first_window_gap(figures),
        "eval_self": eval_self(args),
        "args": args_dict(args),
    }
    return line


def read_long_documents(folder: Path, limit: int = 0, seed: int = 0) -> LongDocuments:
    """The prepared pages and queries; with `limit`, a seeded subset of pages and the
    queries whose gold page is in it."""
    parquet, queries_file = folder / "documents.parquet", folder / "queries.jsonl"
    if not parquet.is_file() or not queries_file.is_file():
        raise SystemExit(
            f"{folder} has no documents.parquet and queries.jsonl: run "
            "benchmarks/prepare_long_documents.py, or pass --data-dir"
        )
    table = pq.read_table(parquet, columns=["id", "text"])
    ids, texts = table.column("id").to_pylist(), table.column("text").to_pylist()
    queries = [json.loads(line) for line in queries_file.read_text().splitlines() if line]
    if limit and limit < len(ids):
        kept = sorted(random.Random(seed).sample(range(len(ids)), limit))
        ids, texts = [ids[n] for n in kept], [texts[n] for n in kept]
        queries = [q for q in queries if q["gold_id"] in set(ids)]
        parquet = folder.parent / f"documents_{limit}.parquet"  # for a CLI build of the subset
    return LongDocuments(ids, texts, parquet, queries)


def synthetic_documents(folder: Path, count: int, model: str, seed: int = 0) -> LongDocuments:
    """`count` pages of random vocabulary words (about 700 tokens each) and one query of
    each kind per page, six words of a sentence near its start or end: a smoke run's data."""
    rng = random.Random(seed)
    vocabulary = sorted(
        word
        for word in load_tokenizer(model).get_vocab()
        if word.isalpha() and word.isascii() and len(word) >= 5
    )
    ids, texts, queries = [], [], []
    for n in range(count):
        sentences = [" ".join(rng.choices(vocabulary, k=10)) + "." for _ in range(60)]
        ids.append(f"doc{n:04d}")
        texts.append(" ".join(sentences))
        for where, sentence in (("first_window", sentences[2]), ("past_window", sentences[-3])):
            queries.append(
                {"query": " ".join(sentence.split()[2:8]), "gold_id": ids[-1], "where": where}
            )
    folder.mkdir(parents=True, exist_ok=True)
    parquet = folder / "documents.parquet"
    pq.write_table(pa.table({"id": ids, "title": ids, "text": texts}), parquet)
    return LongDocuments(ids, texts, parquet, queries)


def load_tokenizer(model: str):  # -> tokenizers.Tokenizer
    """The model's fast tokenizer, with no truncation: the chunker needs every token."""
    import tokenizers

    tokenizer = tokenizers.Tokenizer.from_file(str(resolve_model(model).path / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def tokenize_all(tokenizer, texts: list[str]) -> list[list[int]]:
    return [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]


def chunk_windows(tokenizer, texts: list[str], window: int, overlap: int) -> Chunks:
    """Each text cut into windows of `window` tokens, each starting `window - overlap` after
    the last, the last window ending with the text (fixed windows, no regard for sentences or
    sections)."""
    if not 0 <= overlap < window:
        raise SystemExit(f"--chunk-overlap {overlap} must be below the window ({window} tokens)")
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    token_ids, spans, owners = [], [], []
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    for owner, encoding in enumerate(encodings):
        ids, offsets = encoding.ids, encoding.offsets
        starts = range(0, max(len(ids) - overlap, 1), window - overlap)
        for start in starts:
            end = min(start + window, len(ids))
            token_ids.append([cls, *ids[start:end], sep])
            spans.append((offsets[start][0], offsets[end - 1][1]) if ids else (0, 0))
            owners.append(owner)
    return Chunks(token_ids, spans, np.asarray(owners, dtype=np.int64))


def timed_encode(
    encoder: BiEncoder, texts: list[str], token_ids: list[list[int]], batch_size: int | None
) -> tuple[np.ndarray, dict]:
    """Vectors of texts given as their token ids, and the encoder's tokens/s (real tokens,
    [CLS] and [SEP] counted, padding not)."""
    started = time.perf_counter()
    vectors = encoder.encode(TokenizedTexts(texts, token_ids), batch_size=batch_size)
    seconds = time.perf_counter() - started
    tokens = sum(len(ids) for ids in token_ids)
    return vectors, {
        "texts": len(token_ids),
        "tokens": tokens,
        "seconds": round(seconds, 2),
        "tokens_per_s": round(tokens / seconds, 1),
    }


def truncation_variant(
    encoder: BiEncoder, data: LongDocuments, queries: np.ndarray, batch_size: int | None
) -> Variant:
    started = time.perf_counter()
    token_ids = encoder.tokenize(data.texts)  # cut at the model's length, as a build does
    vectors, encode = timed_encode(encoder, data.texts, token_ids, batch_size)
    build_s = time.perf_counter() - started
    rankings = rank_documents(data.ids, queries, normalize_rows(vectors))
    return Variant(rankings, build_s, vectors.nbytes, len(vectors), encode)


def encode_chunks(
    encoder: BiEncoder,
    tokenizer,
    texts: list[str],
    window: int,
    overlap: int,
    batch_size: int | None,
) -> tuple[np.ndarray, Chunks, dict]:
    """The fixed windows and their vectors; `seconds_with_chunking` adds the
    chunking to the encoding."""
    started = time.perf_counter()
    chunks = chunk_windows(tokenizer, texts, window, overlap)
    chunk_texts = [texts[owner][a:b] for owner, (a, b) in zip(chunks.owners, chunks.spans)]
    vectors, encode = timed_encode(encoder, chunk_texts, chunks.token_ids, batch_size)
    encode["seconds_with_chunking"] = round(time.perf_counter() - started, 2)
    return normalize_rows(vectors), chunks, encode


def eval_self(args) -> dict:
    """`semsearch eval self` on the chunked index: its label-free recall@10 and MRR@10 by
    page, beside the labelled queries' figures."""
    index_dir = args.out_dir / "indexes"
    command = ["eval", "self", "long_documents_chunks", "--index-dir", str(index_dir), "--json"]
    command = semsearch_cli(*command, "--device", args.device)
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result = json.loads(output.strip().splitlines()[-1])
    return {**result["metrics"], "past_first_window": result["past_first_window"]}


def best_chunk_by_semsearch(args, data: LongDocuments) -> dict[str, Variant]:
    """Variant 2 as users will run it: `semsearch build --chunking on`, then `semsearch
    query --group documents` (one hit a page, by its best chunk; its `id` is the page's),
    dense and hybrid (BM25 over the same chunks, fused)."""
    index_dir, name = args.out_dir / "indexes", "long_documents_chunks"
    build = ["build", str(data.parquet), "--name", name, "--out-dir", str(index_dir)]
    build += ["--id-column", "id", "--model", args.model, "--device", args.device]
    tokens = str(args.chunk_tokens - 2)  # semsearch counts a chunk's tokens without [CLS]/[SEP]
    build += ["--chunking", "on", "--chunk-tokens", tokens, "--overwrite"]
    build += ["--chunk-overlap", str(args.chunk_overlap)]
    build = semsearch_cli(*build)
    started = time.perf_counter()
    subprocess.run(build, check=True)
    build_s = time.perf_counter() - started
    queries_file = args.out_dir / "long_documents_queries.txt"
    queries_file.write_text("".join(q["query"] + "\n" for q in data.queries), encoding="utf-8")
    folder = index_dir / name
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    rows = IndexFolder(folder).manifest().rows
    variants = {}
    for mode in ("dense", "hybrid"):  # BM25 over the same chunks, fused, grouped the same way
        query = ["query", "--index", name, "--index-dir", str(index_dir), "--json", "-k", str(K)]
        query += ["--file", str(queries_file), "--group", "documents", "--mode", mode]
        query = semsearch_cli(*query, "--device", args.device)
        output = subprocess.run(query, check=True, capture_output=True, text=True).stdout
        found: dict[str, list[str]] = {}
        for line in output.splitlines():
            hit = json.loads(line)
            found.setdefault(hit["query"], []).append(str(hit["id"]))  # the page, once
        rankings = [found.get(q["query"], [])[:K] for q in data.queries]
        variants[mode] = Variant(rankings, build_s, size, rows)
    return variants


def mean_chunks_variant(
    data: LongDocuments, queries: np.ndarray, vectors: np.ndarray, chunks: Chunks, encode: dict
) -> Variant:
    """One vector a page, the normalised mean of its chunks' vectors, searched exactly."""
    started = time.perf_counter()
    starts = np.flatnonzero(np.r_[True, chunks.owners[1:] != chunks.owners[:-1]])
    means = normalize_rows(np.add.reduceat(vectors, starts, axis=0))  # every page has a chunk
    build_s = encode["seconds_with_chunking"] + time.perf_counter() - started
    rankings = rank_documents(data.ids, queries, means)
    return Variant(rankings, build_s, means.nbytes, len(means))


def rank_documents(ids: list[str], queries: np.ndarray, vectors: np.ndarray) -> list[list[str]]:
    top = exact_search(normalize_rows(queries), vectors, min(K, len(ids)))
    return [[ids[n] for n in row] for row in top]


def by_kind(rankings: list[list[str]], queries: list[dict]) -> dict:
    """Recall@10 and nDCG@10 by page, for each kind of query."""
    result = {}
    for kind in KINDS:
        chosen = [n for n, q in enumerate(queries) if q["where"] == kind]
        if not chosen:
            continue
        metrics = ir_metrics(
            {str(n): rankings[n] for n in chosen},
            {str(n): {queries[n]["gold_id"]: 1} for n in chosen},
        )
        result[kind] = {
            "recall_at_10": round(metrics["recall@10"], 4),
            "ndcg_at_10": round(metrics["ndcg@10"], 4),
            "queries": len(chosen),
        }
    return result


def first_window_gap(figures: dict) -> dict:
    """Best chunk less truncation on the first-window queries (the goal: never below 0)."""
    best, truncation = figures["best_chunk"], figures["truncation"]
    if "first_window" not in best or "first_window" not in truncation:
        return {}
    return {
        metric: round(best["first_window"][metric] - truncation["first_window"][metric], 4)
        for metric in ("recall_at_10", "ndcg_at_10")
    }


if __name__ == "__main__":
    main()
