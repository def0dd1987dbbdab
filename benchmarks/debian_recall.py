"""Retrieval quality on Debian: find a package's long description from its one-line synopsis.

Why: it is a real retrieval task with one known answer per query, so recall@10 checks the
whole path text -> vector -> FAISS index -> ranked rows. The anchor is sentence-transformers
with exact cosine search on the same model; semsearch's exact (flat) index must
match it within 0.002, and the approximate indexes (IVF, HNSW) show what they lose at a few
nprobe / efSearch values. semsearch's indexes are built as `semsearch build` builds them
(`choose_index`, then `VectorIndex`).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow.parquet as pq
from common import (
    args_dict,
    base_parser,
    environment,
    load_sentence_transformer,
    markdown_table,
    record,
)

from semsearch.ann.exact import ExactSearch
from semsearch.index.factory import choose_index
from semsearch.index.tune import recall_at_k, target_recall
from semsearch.index.vector_index import VectorIndex, prepare_vectors
from semsearch.models import BiEncoder

METRIC = "cosine"
SWEEPS = {"flat": ("", [0]), "ivf": ("nprobe", [1, 4, 16, 32, 128]),
          "hnsw": ("efSearch", [16, 32, 64, 128, 256])}  # fmt: skip


def load_packages(data_dir, rows: int) -> tuple[list[str], list[str], dict]:
    """Long and short descriptions of the first `rows` packages, and where the empty one is."""
    table = pq.read_table(data_dir / "debian" / "debian_packages.parquet")
    long_texts = table.column("long_description").to_pylist()
    empty = [row for row, text in enumerate(long_texts) if not (text or "").strip()]
    facts = {"file_rows": table.num_rows, "empty_long_description_rows": empty,
             "packages": [table.column("package")[row].as_py() for row in empty],
             "empty_among_indexed": any(row < rows for row in empty)}  # fmt: skip
    short_texts = table.column("short_description").slice(0, rows).to_pylist()
    return long_texts[:rows], short_texts, facts


def semsearch_recalls(docs: np.ndarray, queries: np.ndarray, k: int) -> list[dict]:
    """recall@k of each semsearch index kind at each value of its search knob."""
    wanted = np.arange(len(queries))
    results = []
    for kind, (knob, values) in SWEEPS.items():
        spec = choose_index(kind, len(docs), docs.shape[1], METRIC)
        index = VectorIndex.create(spec, docs.shape[1])
        started = time.perf_counter()
        sample = index.training_rows(len(docs))
        if sample:  # a uniform sample, as `semsearch build` draws it
            chosen = np.sort(np.random.default_rng(0).choice(len(docs), sample, replace=False))
            index.train(docs[chosen])  # train and add prepare (normalise) the vectors
        index.add(docs, np.arange(len(docs)))  # ids = row numbers, as `wanted` counts them
        build_seconds = time.perf_counter() - started
        prepared = prepare_vectors(queries, METRIC)
        for value in values:
            params = {knob: value} if knob else {}
            _scores, found = index.search(prepared, k, params)
            results.append({"engine": "semsearch", "index": spec.factory, "params": params,
                            "default_params": spec.search_params,
                            "build_seconds": round(build_seconds, 2),
                            f"recall@{k}": target_recall(found, wanted)})  # fmt: skip
    return results


def exact_cosine_top_k(docs: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Rows of the `k` highest cosines per query, by the library's exact k-NN (vectors are unit)."""
    return ExactSearch(docs, "dot").search(queries, k)[1]


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000, help="first N packages, file order")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="for both encoders")
    args = parser.parse_args()
    env = environment()
    started = time.perf_counter()
    docs, queries, facts = load_packages(args.data_dir, args.rows)
    print(f"empty long descriptions in the file at rows {facts['empty_long_description_rows']} "
          f"({facts['packages']}); among the first {args.rows}: {facts['empty_among_indexed']}")  # fmt: skip

    ours = BiEncoder.load(device="cpu")
    our_docs = ours.encode(docs, batch_size=args.batch_size)
    our_queries = ours.encode(queries, batch_size=args.batch_size)
    results = semsearch_recalls(our_docs, our_queries, args.k)

    anchor = load_sentence_transformer()
    st_docs, st_queries = (
        anchor.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
        for texts in (docs, queries)
    )
    st_found = exact_cosine_top_k(st_docs, st_queries, args.k)
    st_recall = target_recall(st_found, np.arange(len(queries)))
    results.append({"engine": "sentence-transformers", "index": "exact cosine",
                    "params": {}, f"recall@{args.k}": st_recall})  # fmt: skip
    ours_exact = exact_cosine_top_k(our_docs, our_queries, args.k)
    same_top_k = recall_at_k(ours_exact, st_found, args.k)

    metric = f"recall@{args.k}"
    for entry in results:
        entry["vs_st"] = round(entry[metric] - st_recall, 4)
    flat = results[0][metric]
    verdict = "PASS" if abs(flat - st_recall) <= 0.002 else "MISS"
    print(markdown_table(
        ["engine", "index", "search params", metric, "minus ST"],
        [[r["engine"], r["index"], r["params"] or "-", f"{r[metric]:.4f}", f"{r['vs_st']:+.4f}"]
         for r in results],
    ))  # fmt: skip
    print(f"\nsemsearch flat {flat:.4f} vs sentence-transformers {st_recall:.4f}: {verdict} "
          f"(target |diff| <= 0.002); top-{args.k} overlap of the two exact searches {same_top_k:.4f}")  # fmt: skip
    payload = {"benchmark": "debian_recall", "args": args_dict(args), "environment": env,
               "data": facts, "results": results, "flat_vs_st": verdict,
               "exact_top_k_overlap_semsearch_vs_st": same_top_k,
               "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    record(args, "debian_recall", payload)


if __name__ == "__main__":
    main()
