"""Paraphrase-mining average precision on a collection built from STS-B.

The collection is STS-B's sentences, deduplicated; its pairs scored 4 or more are the
paraphrases, ranked as sentence-transformers' ParaphraseMiningEvaluator ranks them.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import args_dict, base_parser, environment, record, stsb_file

from semsearch.evaluation import read_stsb
from semsearch.mining import CorpusSource, MiningOptions, MiningResult, mine_corpus

SPLITS = ("train", "dev", "test")
GOLD_SCORE = 4.0


def stsb_collection(
    data_dir: Path, limit: int | None = None
) -> tuple[list[str], set[tuple[int, int]], int]:
    """Distinct sentences, gold pairs as (row, row) with row < row, and the STS-B row count
    (of the first `limit` pairs of train+dev+test, or all)."""
    splits = [read_stsb(stsb_file(data_dir, split)) for split in SPLITS]
    pairs = {key: [value for split in splits for value in split[key]][:limit] for key in splits[0]}
    sentences = list(dict.fromkeys(pairs["sentence1"] + pairs["sentence2"]))
    row_of = {sentence: row for row, sentence in enumerate(sentences)}
    gold = set()
    for first, second, score in zip(pairs["sentence1"], pairs["sentence2"], pairs["score"]):
        a, b = row_of[first], row_of[second]
        if 5 * score >= GOLD_SCORE and a != b:  # read_stsb divides the 0-5 gold by 5
            gold.add((min(a, b), max(a, b)))
    return sentences, gold, len(pairs["score"])


def ranking_quality(rows_a: np.ndarray, rows_b: np.ndarray, gold: set[tuple[int, int]]) -> dict:
    """Average precision of the ranked pairs, and the best F1 over cut-offs of that ranking."""
    hits = np.array([(a, b) in gold for a, b in zip(rows_a.tolist(), rows_b.tolist())])
    found = np.cumsum(hits)
    ranks = np.arange(1, len(hits) + 1)
    precision, recall = found / ranks, found / len(gold)
    f1 = np.where(found > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0)
    best = int(np.argmax(f1)) if len(f1) else 0
    return {
        "average_precision": round(float(precision[hits].sum() / len(gold)), 4),
        "gold_pairs_found": int(hits.sum()),
        "precision_of_mined_list": round(float(hits.mean() if len(hits) else 0), 4),
        "best_f1": round(float(f1[best]) if len(f1) else 0, 4),
        "best_f1_at_rank": best + 1,
        "best_f1_precision": round(float(precision[best]), 4),
        "best_f1_recall": round(float(recall[best]), 4),
    }


def sentence_transformers_ap(model: str, sentences: list[str], gold: set, top_k: int) -> dict:
    """The same measure from sentence-transformers' own evaluator, as an independent check."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.evaluation import ParaphraseMiningEvaluator

    from semsearch.models.model_folder import resolve_model

    started = time.perf_counter()
    evaluator = ParaphraseMiningEvaluator(
        {str(row): sentence for row, sentence in enumerate(sentences)},
        [(str(a), str(b)) for a, b in sorted(gold)],
        top_k=top_k,
        max_pairs=len(sentences) * top_k,
        show_progress_bar=False,
    )
    scores = evaluator(SentenceTransformer(str(resolve_model(model).path), device="cpu"))
    return {
        "average_precision": round(scores[f"{evaluator.primary_metric}"], 4),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="bi-encoder: 'default' or a folder")
    parser.add_argument("-k", "--top-k", type=int, default=100, help="neighbours per sentence")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=None, help="first N STS-B pairs (all)")
    parser.add_argument(
        "--compare-sentence-transformers",
        action="store_true",
        help="also run sentence-transformers' ParaphraseMiningEvaluator",
    )
    args = parser.parse_args()
    sentences, gold, stsb_rows = stsb_collection(args.data_dir, args.pairs)
    work = args.out_dir / "tmp"
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "stsb_sentences.parquet"
    pq.write_table(pa.table({"text": sentences}), corpus)

    started = time.perf_counter()
    source = CorpusSource(corpus, model=args.model, batch_size=args.batch_size, device="cpu")
    result: MiningResult = mine_corpus(source, MiningOptions(top_k=args.top_k))
    seconds = time.perf_counter() - started
    quality = ranking_quality(result.rows_a, result.rows_b, gold)
    print(
        f"{len(sentences)} distinct sentences from {stsb_rows} STS-B pairs, {len(gold)} gold "
        f"pairs (score >= {GOLD_SCORE}); {len(result)} pairs mined in {seconds:.1f} s"
    )
    print(f"semsearch mine: {quality}")
    reference = None
    if args.compare_sentence_transformers:
        reference = sentence_transformers_ap(args.model, sentences, gold, args.top_k)
        print(f"sentence-transformers evaluator: {reference}")
    payload = {
        "benchmark": "mine_stsb_ap",
        "args": args_dict(args),
        "environment": environment(),
        "sentences": len(sentences),
        "stsb_pairs": stsb_rows,
        "gold_pairs": len(gold),
        "gold_score": GOLD_SCORE,
        "pairs_mined": len(result),
        "seconds": round(seconds, 1),
        "phases": result.stats.phases,
        "quality": quality,
        "sentence_transformers": reference,
    }
    record(args, "mine_stsb_ap", payload)


if __name__ == "__main__":
    main()
