"""A retrieval cross-encoder trained offline, and whether re-ranking with it helps.

Why: the STS-B cross-encoder halves DBPedia nDCG@10 when it re-ranks (it learnt sentence
similarity, not relevance). This trains one on query -> relevant-document pairs with hard
negatives mined by the bi-encoder, then measures `semsearch eval ir --rerank` on every first
stage (dense, lexical, hybrid), on the DBPedia subset (never trained or selected on) and on
Debian synopsis -> description (the first 5,000 packages, never trained on).

Training data (`--out-dir/rerank/`), binary labels for the `bce` cross-encoder objective:
- Debian: `--debian-queries` packages after the first 10,000: query = synopsis, positive =
  its long description (cut at `--max-chars`), `--negatives` hard negatives = other
  packages' descriptions drawn from ranks 2-30 of the default bi-encoder's search over the
  sampled descriptions;
- PyPI: `--pypi-queries` projects: query = the project's name (dashes and underscores as
  spaces), positive = its summary, hard negatives likewise among the sampled summaries
  (placeholder summaries and repeated ones left out);
- dev: the same recipe on 300 Debian packages from 5,000-9,999 (average precision).

    python benchmarks/retrieval_cross_encoder.py --phase data
    python benchmarks/retrieval_cross_encoder.py --phase train --minutes 24   # resumable
    python benchmarks/retrieval_cross_encoder.py --phase eval
Figures: one JSON line per evaluation in `benchmarks/results/retrieval_cross_encoder.jsonl`.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import (
    REPO_ROOT,
    base_parser,
    environment,
    markdown_table,
    record,
    run_for_minutes,
    semsearch_cli,
)

from semsearch.evaluation.ir import exact_search
from semsearch.evaluation.similarity import normalize_rows

NEGATIVE_RANKS = (1, 30)  # hard negatives come from these ranks (0 is usually the positive)
PLACEHOLDERS = ("add your description here", "my short description for my project.")


def mined_pairs(queries: list[str], documents: list[str], negatives: int, seed: int) -> dict:
    """Each query with its document (label 1) and `negatives` of the others (label 0) that
    the default bi-encoder ranks high for it."""
    from semsearch.models import BiEncoder

    encoder = BiEncoder.load("default", device="cpu")
    vectors = normalize_rows(encoder.encode(documents, batch_size=64))
    query_vectors = normalize_rows(encoder.encode(queries, batch_size=64))
    ranked = exact_search(query_vectors, vectors, NEGATIVE_RANKS[1] + 1)
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"sentence1": [], "sentence2": [], "label": []}
    for number, (query, candidates) in enumerate(zip(queries, ranked)):
        pool = [int(row) for row in candidates[NEGATIVE_RANKS[0] :] if row != number]
        chosen = rng.choice(pool[: NEGATIVE_RANKS[1]], size=negatives, replace=False)
        for text, label in [(documents[number], 1), *((documents[row], 0) for row in chosen)]:
            rows["sentence1"].append(query)
            rows["sentence2"].append(text)
            rows["label"].append(label)
    return rows


def debian_rows(data_dir: Path, start: int, stop: int, count: int, seed: int, max_chars: int):
    table = pq.read_table(data_dir / "debian" / "debian_packages.parquet").to_pydict()
    usable = [
        row
        for row in range(start, min(stop, len(table["package"])))
        if (table["long_description"][row] or "").strip()
    ]
    chosen = sorted(np.random.default_rng(seed).choice(usable, count, replace=False))
    return (
        [table["short_description"][row] for row in chosen],
        [table["long_description"][row][:max_chars] for row in chosen],
    )


def pypi_rows(data_dir: Path, count: int, seed: int) -> tuple[list[str], list[str]]:
    table = pq.read_table(data_dir / "pypi" / "pypi_summaries.parquet", columns=["name", "summary"])
    names, summaries = table.column("name").to_pylist(), table.column("summary").to_pylist()
    seen: dict[str, int] = {}
    for row, summary in enumerate(summaries):
        text = summary.strip()
        if len(text) >= 25 and text.lower() not in PLACEHOLDERS:
            seen[text] = -1 if text in seen else row  # a repeated summary is nobody's own
    rows = sorted(row for row in seen.values() if row >= 0)
    chosen = sorted(np.random.default_rng(seed).choice(rows, count, replace=False))
    queries = [names[row].replace("-", " ").replace("_", " ") for row in chosen]
    return queries, [summaries[row].strip() for row in chosen]


def prepare_data(args) -> dict[str, Path]:
    folder = args.out_dir / "rerank"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "train": folder / "train_pairs.parquet",
        "dev": folder / "dev_pairs.parquet",
        "debian_beir": folder / "debian_first5000",
    }
    if args.phase != "data" and paths["train"].is_file():
        return paths
    started = time.monotonic()
    parts = [
        mined_pairs(
            *debian_rows(args.data_dir, 10_000, 10**9, args.debian_queries, 0, args.max_chars),
            args.negatives,
            0,
        )
    ]
    if args.pypi_queries:
        parts.append(
            mined_pairs(*pypi_rows(args.data_dir, args.pypi_queries, 0), args.negatives, 1)
        )
    train = {key: [value for part in parts for value in part[key]] for key in parts[0]}
    dev = mined_pairs(*debian_rows(args.data_dir, 5_000, 10_000, 300, 1, args.max_chars), 3, 2)
    pq.write_table(pa.table(train), paths["train"])
    pq.write_table(pa.table(dev), paths["dev"])
    write_debian_beir(args.data_dir, paths["debian_beir"], args.debian_eval_queries)
    print(
        f"pairs: train {len(train['label'])}, dev {len(dev['label'])} "
        f"({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    return paths


def write_debian_beir(data_dir: Path, folder: Path, queries: int) -> None:
    """The first 5,000 packages as a BEIR folder: corpus = long descriptions, the first
    `queries` synopses as queries, each judging its own package's description relevant."""
    table = pq.read_table(data_dir / "debian" / "debian_packages.parquet").slice(0, 5000)
    long_texts = table.column("long_description").to_pylist()
    short_texts = table.column("short_description").to_pylist()
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for row, text in enumerate(long_texts):
            handle.write(json.dumps({"_id": str(row), "title": "", "text": text or ""}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for row in range(queries):
            handle.write(json.dumps({"_id": str(row), "text": short_texts[row]}) + "\n")
    lines = "".join(f"{row}\t{row}\t1\n" for row in range(queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + lines)


def train(args, paths: dict[str, Path], output: Path) -> bool:
    arguments = [
        "train",
        str(paths["train"]),
        "--cross-encoder",
        "-o",
        str(output),
        "--model",
        args.model,
        "--dev",
        str(paths["dev"]),
        "--epochs",
        str(args.epochs),
        "--batch-size",
        "16",
        "--lr",
        str(args.lr),
        "--eval-every",
        str(args.eval_every),
        "--checkpoint-every",
        "100",
        "--precision",
        args.precision,
        "--device",
        "cpu",
    ]
    print("training:", " ".join(["semsearch", *arguments]), flush=True)
    if (output / "training.json").is_file():
        return True
    code = run_for_minutes(semsearch_cli(*arguments), args.minutes)
    if code is None:
        print("stopped: run --phase train again to resume", flush=True)
    return code == 0


def evaluate(args, paths: dict[str, Path], output: Path) -> None:
    tasks = {
        "dbpedia": (args.data_dir / "beir_dbpedia-entity-mini", args.rerank_top),
        "debian": (paths["debian_beir"], args.debian_rerank_top),
    }
    rows = []
    for task, (folder, top) in tasks.items():
        if args.tasks and task not in args.tasks:
            continue
        out = output / f"eval_{task}_top{top}.json"
        command = [
            "eval",
            "ir",
            str(folder),
            "--model",
            args.first_stage,
            "--rerank",
            str(output),
            "--rerank-top",
            str(top),
            "--device",
            "cpu",
        ]
        started = time.monotonic()
        subprocess.run(semsearch_cli(*command, "--out", str(out)), check=True, cwd=REPO_ROOT)
        result = json.loads(out.read_text())
        line = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "benchmark": "retrieval_cross_encoder",
            "task": task,
            "cross_encoder": str(output),
            "first_stage_model": args.first_stage,
            "rerank_top": top,
            "command": " ".join(["semsearch", *command]),
            "seconds": round(time.monotonic() - started, 1),
            "modes": {
                mode: {
                    k: round(v, 4) for k, v in m.items() if k in ("ndcg@10", "recall@100", "mrr@10")
                }
                for mode, m in result["modes"].items()
            },
            "verdicts": result["rerank_verdicts"],
            "environment": environment(),
        }
        record(args, "retrieval_cross_encoder", line)
        for mode, metrics in line["modes"].items():
            rows.append([task, mode, metrics["ndcg@10"], metrics["recall@100"]])
    print(markdown_table(["task", "mode", "nDCG@10", "recall@100"], rows))


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=["data", "train", "eval", "all"], default="all")
    parser.add_argument("--model", default="default", help="the cross-encoder's starting model")
    parser.add_argument("--first-stage", default="default", help="the bi-encoder that retrieves")
    parser.add_argument("--debian-queries", type=int, default=4000)
    parser.add_argument("--pypi-queries", type=int, default=2000)
    parser.add_argument("--negatives", type=int, default=3)
    parser.add_argument("--max-chars", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--eval-every", type=int, default=300)
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--minutes", type=float, default=24.0)
    parser.add_argument("--rerank-top", type=int, default=100)
    parser.add_argument("--debian-eval-queries", type=int, default=1000)
    parser.add_argument("--debian-rerank-top", type=int, default=20)
    parser.add_argument("--tasks", nargs="*", default=None, help="dbpedia, debian (default both)")
    args = parser.parse_args()
    paths = prepare_data(args)
    output = args.out_dir / "models" / f"cross-retrieval-{Path(args.model).name}"
    if args.phase == "data":
        return
    if args.phase in ("train", "all") and not train(args, paths, output):
        return
    if args.phase in ("eval", "all"):
        evaluate(args, paths, output)


if __name__ == "__main__":
    main()
