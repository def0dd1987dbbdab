"""Does `--quantize int8` find the neighbours fp32 finds, and how much faster is it?

For each corpus (PyPI summaries, Debian long descriptions) the first `--*-rows` texts are
the corpus, encoded in batches as a build does, and the next `--queries` texts are queries,
encoded one at a time as `semsearch query` does. Recall@10 is the share of the int8 top 10
(exact search over the int8 vectors) that scores, in fp32, at least as well as the fp32
10th neighbour (ties count as hits). Also: corpus encode speed int8 vs fp32 (texts/s, the
two alternating in one run) and STS-B test Spearman of both. Appends one JSON line to
`benchmarks/results/int8_recall.jsonl`.

    nice python benchmarks/int8_recall.py --threads 1
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


def corpus_and_queries(args) -> dict[str, list[str]]:
    """Corpus plus queries per data set, in file order, empty texts left out."""
    wanted = {"pypi": args.pypi_rows, "debian": args.debian_rows}
    return {
        name: corpus_texts(args.data_dir, name, rows + args.queries)
        for name, rows in wanted.items()
        if rows > 0
    }


def compare(encoders: dict[str, BiEncoder], texts: list[str], rows: int) -> dict:
    corpus, queries = texts[:rows], texts[rows:]
    vectors, seconds = {}, {}
    for name, encoder in encoders.items():
        started = time.perf_counter()
        vectors[name] = encoder.encode(corpus)
        seconds[name] = time.perf_counter() - started
    query_vectors = {
        name: np.concatenate([e.encode([q]) for q in queries]) for name, e in encoders.items()
    }
    # int8's neighbours judged on their fp32 scores, against fp32's exact k-th (tie-aware)
    kth = ExactSearch(vectors["fp32"], "dot").search(query_vectors["fp32"], K)[0][:, -1]
    found = ExactSearch(vectors["int8"], "dot").search(query_vectors["int8"], K)[1]
    recall = rescored_recall(found, query_vectors["fp32"], vectors["fp32"], kth, "dot")
    cosines = row_cosines(vectors["int8"], vectors["fp32"])
    speed = {name: len(corpus) / seconds[name] for name in encoders}
    return {
        "rows": len(corpus),
        "queries": len(queries),
        "recall_at_10": round(recall, 4),
        "cosine_mean": round(float(cosines.mean()), 5),
        "cosine_min": round(float(cosines.min()), 5),
        "fp32_texts_per_s": round(speed["fp32"], 1),
        "int8_texts_per_s": round(speed["int8"], 1),
        "speed_ratio": round(speed["int8"] / speed["fp32"], 2),
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pypi-rows", type=int, default=20_000)
    parser.add_argument("--debian-rows", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=300, help="held-out texts per corpus")
    parser.add_argument("--sts-pairs", type=int, default=None, help="STS-B test pairs (all)")
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    started = time.perf_counter()
    encoders = {
        "fp32": BiEncoder.load("default", device="cpu"),
        "int8": BiEncoder.load("default", device="cpu", quantization="int8"),
    }
    report = {"benchmark": "int8_recall", "environment": environment(), "corpora": {}}
    for name, texts in corpus_and_queries(args).items():
        rows = len(texts) - args.queries
        report["corpora"][name] = compare(encoders, texts, rows)
        print(name, json.dumps(report["corpora"][name]), flush=True)
    pairs = read_stsb(stsb_file(args.data_dir, "test"))
    sts = STSEvaluator.from_columns(
        {key: column[: args.sts_pairs] for key, column in pairs.items()}
    )
    report["stsb_spearman"] = {
        name: round(sts.evaluate(e)["spearman_cosine"], 4) for name, e in encoders.items()
    }
    report["stsb_cost"] = round(
        report["stsb_spearman"]["fp32"] - report["stsb_spearman"]["int8"], 4
    )
    report["args"] = {key: str(value) for key, value in vars(args).items()}
    report["seconds"] = round(time.perf_counter() - started, 1)
    rows = [
        [
            name,
            r["rows"],
            r["queries"],
            r["recall_at_10"],
            f"{r['cosine_mean']} / {r['cosine_min']}",
            r["fp32_texts_per_s"],
            r["int8_texts_per_s"],
            f"{r['speed_ratio']}x",
        ]
        for name, r in report["corpora"].items()
    ]
    print(
        markdown_table(
            [
                "corpus",
                "rows",
                "queries",
                "recall@10",
                "cosine mean / min",
                "fp32 texts/s",
                "int8 texts/s",
                "int8 / fp32",
            ],
            rows,
        )
    )
    print(
        f"STS-B test Spearman: fp32 {report['stsb_spearman']['fp32']}, int8 "
        f"{report['stsb_spearman']['int8']} (cost {report['stsb_cost']}); {report['seconds']} s"
    )
    record(args, "int8_recall", report)


if __name__ == "__main__":
    main()
