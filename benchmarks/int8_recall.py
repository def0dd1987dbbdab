"""The int8 encoder against fp32: recall@10 of its neighbours, cosine, encode speed, STS-B.

Candidates, measured side by side in one run against the torch fp32 encoder:
`openvino-int8` (`--quantize int8`: the export quantised by NNCF) and, for scale,
`openvino-bf16` (the default fp32 model on OpenVINO, `--runtime auto`). Issue 38 compared a
third, torch's `Int8Linear`, here (commit 230456715929) and removed it: the default runtime
was faster and closer to fp32 (docs/encoder-and-runtimes.md).

For each corpus (PyPI summaries, Debian long descriptions) the first `--*-rows` texts are
the corpus, encoded in batches as a build does (after a warm-up; texts/s), and the next
`--queries` texts are queries, encoded one at a time as `semsearch query` does (ms each).
Recall@10 is the share of a candidate's top 10 (exact search over its own vectors) that
scores, in fp32, at least as well as the fp32 10th neighbour (ties count as hits); cosine is
each corpus vector's to its fp32 one. A candidate that falls back to another runtime stops
the run. Appends one JSON line to `benchmarks/results/int8_recall.jsonl`: the top-level
figures of each corpus are those of `--quantize int8` (`int8` names it), `candidates` holds
every candidate's.

    flock /tmp/cpu.lock python benchmarks/int8_recall.py --threads 2 --queries 500
"""

from __future__ import annotations

import json
import time

import numpy as np
from common import (
    add_threads_option,
    base_parser,
    corpus_texts,
    environment,
    markdown_table,
    record,
    set_threads,
    stsb_file,
)

from semsearch.ann.exact import ExactSearch
from semsearch.ann.tune import rescored_recall
from semsearch.evaluation.datasets import read_stsb
from semsearch.evaluation.similarity import row_cosines
from semsearch.evaluation.sts import STSEvaluator
from semsearch.models import BiEncoder

K = 10
WARMUP = 64  # texts encoded before the clock starts (kernel choice, first-call costs)
# name: (BiEncoder.load's options, how the runtime it must end up on starts)
CANDIDATES = {
    "openvino-int8": ({"quantization": "int8"}, "openvino-int8"),
    "openvino-bf16": ({"runtime": "openvino"}, "openvino-"),  # f32 on CPUs without bf16
}
DEFAULT_INT8 = "openvino-int8"  # what `--quantize int8` runs


def load_encoders(names: list[str]) -> dict[str, BiEncoder]:
    """fp32 on torch (the reference) and each candidate, checked to run where it should."""
    encoders = {"fp32": BiEncoder.load("default", device="cpu", runtime="torch")}
    for name in names:
        options, runtime = CANDIDATES[name]
        encoder = BiEncoder.load("default", device="cpu", **options)  # type: ignore[arg-type]
        if not encoder.runtime.startswith(runtime):
            raise SystemExit(f"{name} fell back to {encoder.runtime}: not measured")
        encoders[name] = encoder
    return encoders


def corpus_and_queries(args) -> dict[str, list[str]]:
    """Corpus plus queries per data set, in file order, empty texts left out."""
    wanted = {"pypi": args.pypi_rows, "debian": args.debian_rows}
    return {
        name: corpus_texts(args.data_dir, name, rows + args.queries)
        for name, rows in wanted.items()
        if rows > 0
    }


def timed(encoder: BiEncoder, corpus: list[str], queries: list[str]) -> dict:
    """Corpus and query vectors, corpus texts/s and ms per query."""
    encoder.encode(corpus[:WARMUP])
    started = time.perf_counter()
    vectors = encoder.encode(corpus)
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    query_vectors = np.concatenate([encoder.encode([q]) for q in queries])
    query_seconds = time.perf_counter() - started
    return {
        "vectors": vectors,
        "query_vectors": query_vectors,
        "texts_per_s": round(len(corpus) / seconds, 1),
        "query_ms": round(1000 * query_seconds / max(len(queries), 1), 2),
    }


def compare(encoders: dict[str, BiEncoder], texts: list[str], rows: int) -> dict:
    corpus, queries = texts[:rows], texts[rows:]
    runs = {name: timed(encoder, corpus, queries) for name, encoder in encoders.items()}
    fp32 = runs.pop("fp32")
    kth = ExactSearch(fp32["vectors"], "dot").search(fp32["query_vectors"], K)[0][:, -1]
    candidates = {}
    for name, run in runs.items():
        # a candidate's neighbours judged on their fp32 scores, against fp32's exact k-th
        found = ExactSearch(run["vectors"], "dot").search(run["query_vectors"], K)[1]
        recall = rescored_recall(found, fp32["query_vectors"], fp32["vectors"], kth, "dot")
        cosines = row_cosines(run["vectors"], fp32["vectors"])
        candidates[name] = {
            "recall_at_10": round(recall, 4),
            "cosine_mean": round(float(cosines.mean()), 5),
            "cosine_min": round(float(cosines.min()), 5),
            "texts_per_s": run["texts_per_s"],
            "speed_ratio": round(run["texts_per_s"] / fp32["texts_per_s"], 2),
            "query_ms": run["query_ms"],
        }
    default = candidates.get(DEFAULT_INT8, {})
    return {
        "rows": len(corpus),
        "queries": len(queries),
        "fp32_texts_per_s": fp32["texts_per_s"],
        "fp32_query_ms": fp32["query_ms"],
        **{key: default[key] for key in ("recall_at_10", "cosine_mean", "cosine_min") if default},
        **({"int8_texts_per_s": default["texts_per_s"]} if default else {}),
        **({"speed_ratio": default["speed_ratio"]} if default else {}),
        "candidates": candidates,
    }


def stsb_spearman(args, encoders: dict[str, BiEncoder]) -> dict[str, float]:
    pairs = read_stsb(stsb_file(args.data_dir, "test"))
    sts = STSEvaluator.from_columns(
        {key: column[: args.sts_pairs] for key, column in pairs.items()}
    )
    scores = {name: round(sts.evaluate(e)["spearman_cosine"], 4) for name, e in encoders.items()}
    if DEFAULT_INT8 in scores:
        scores["int8"] = scores[DEFAULT_INT8]
    return scores


def print_table(report: dict) -> None:
    rows = [
        [
            corpus,
            name,
            figures["recall_at_10"],
            f"{figures['cosine_mean']} / {figures['cosine_min']}",
            f"{figures['texts_per_s']} ({figures['speed_ratio']}x)",
            figures["query_ms"],
            report["stsb_spearman"][name],
        ]
        for corpus, result in report["corpora"].items()
        for name, figures in [
            (
                "fp32",
                {
                    "recall_at_10": 1.0,
                    "cosine_mean": 1.0,
                    "cosine_min": 1.0,
                    "texts_per_s": result["fp32_texts_per_s"],
                    "speed_ratio": 1.0,
                    "query_ms": result["fp32_query_ms"],
                },
            ),
            *result["candidates"].items(),
        ]
    ]
    headers = ["corpus", "encoder", "recall@10", "cosine mean / min", "texts/s (x fp32)"]
    print(markdown_table([*headers, "ms a query", "STS-B Spearman"], rows))


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pypi-rows", type=int, default=20_000)
    parser.add_argument("--debian-rows", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=500, help="held-out texts per corpus")
    parser.add_argument("--sts-pairs", type=int, default=None, help="STS-B test pairs (all)")
    parser.add_argument(
        "--candidates",
        default=",".join(CANDIDATES),
        help=f"comma-separated, of {', '.join(CANDIDATES)} (default: all)",
    )
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    started = time.perf_counter()
    encoders = load_encoders(args.candidates.split(","))
    report = {
        "benchmark": "int8_recall",
        "environment": environment(),
        "int8": DEFAULT_INT8,
        "corpora": {},
    }
    for name, texts in corpus_and_queries(args).items():
        rows = len(texts) - args.queries
        report["corpora"][name] = compare(encoders, texts, rows)
        print(name, json.dumps(report["corpora"][name]), flush=True)
    report["stsb_spearman"] = stsb_spearman(args, encoders)
    if "int8" in report["stsb_spearman"]:
        cost = report["stsb_spearman"]["fp32"] - report["stsb_spearman"]["int8"]
        report["stsb_cost"] = round(cost, 4)
    report["args"] = {key: str(value) for key, value in vars(args).items()}
    report["seconds"] = round(time.perf_counter() - started, 1)
    print_table(report)
    print(f"{report['seconds']} s")
    record(args, "int8_recall", report)


if __name__ == "__main__":
    main()
