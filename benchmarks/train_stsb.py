"""Fine-tune the default model on STS-B train, select on STS-B dev, report STS-B test.

    python benchmarks/train_stsb.py --objective cosine --epochs 4      # ~1 h on 2 CPU cores
    python benchmarks/train_stsb.py --objective cosent --epochs 4
    python benchmarks/train_stsb.py --silver-pairs 10000 --cross-encoder out/models/cross-stsb

With `--add-sick` the 4,439 SICK train pairs join the STS-B train pairs, their 1-5
relatedness mapped onto [0, 1] like STS-B's 0-5 score: more graded pairs of the same kind.
With `--silver-pairs N` the training data is augmented as in Augmented SBERT (Thakur et
al., 2021): N new pairs of STS-B train sentences, each sentence paired with its nearest
neighbours under the starting bi-encoder, are scored by a cross-encoder trained on the
same gold pairs, and added to the gold pairs. Dev and test are untouched.

Before training, the default model is measured on STS-B test (the anchor's figure is
0.820 Spearman of the cosine). The trained model goes to `out/models/stsb-<objective>/`;
if the run is interrupted, the same command resumes it from its checkpoint. Figures: one
JSON line in `results/train_stsb.jsonl`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import record
from training_bench import (
    base_parser,
    data_files,
    environment,
    markdown_table,
    use_threads,
)

from semsearch.ann.exact import ExactSearch
from semsearch.evaluation import STSEvaluator, read_sick, read_stsb
from semsearch.models import BiEncoder
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.training import (
    DataOptions,
    OptimizationOptions,
    RunOptions,
    TrainingConfig,
    train,
)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--objective",
        default="cosine",
        help="cosine or cosent (any objective that reads sentence1, sentence2, score)",
    )
    parser.add_argument("--model", default="default", help="the starting model")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument(
        "--eval-every", type=int, default=180, help="dev every N steps (and at epoch ends)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=None, help="a quick try")
    parser.add_argument("--overwrite", action="store_true", help="replace a finished run")
    parser.add_argument(
        "--silver-pairs",
        type=int,
        default=0,
        help="add this many cross-encoder-scored pairs (Augmented SBERT)",
    )
    parser.add_argument(
        "--cross-encoder",
        type=Path,
        default=None,
        help="the cross-encoder that scores the silver pairs",
    )
    parser.add_argument("--neighbours", type=int, default=3, help="silver partners per sentence")
    parser.add_argument(
        "--add-sick",
        action="store_true",
        help="train on STS-B train plus SICK train relatedness pairs",
    )
    args = parser.parse_args()
    if args.silver_pairs and args.cross_encoder is None:
        raise SystemExit("--silver-pairs needs --cross-encoder: the model that scores them")
    files = data_files(args.data_dir)
    use_threads(args.threads)
    started = time.monotonic()

    test = STSEvaluator.from_columns(read_stsb(files["stsb_test"]), name="stsb-test")
    before_seconds = time.monotonic()
    before = test(BiEncoder.load(args.model, device="cpu"))
    before_seconds = time.monotonic() - before_seconds
    print(
        f"{args.model} on STS-B test: spearman_cosine {before['spearman_cosine']:.4f} "
        f"({before_seconds:.0f} s)",
        flush=True,
    )

    run = (
        f"stsb-{args.objective}"
        + ("-augmented" if args.silver_pairs else "")
        + ("-sick" if args.add_sick else "")
    )
    output = args.out_dir / "models" / run
    train_data, silver = f"stsb:{files['stsb_train']}", {}
    if args.silver_pairs:
        train_path, silver = augmented_train_file(files["stsb_train"], args)
        train_data = str(train_path)
    if args.add_sick:
        train_data = str(with_sick(train_data, files["sick_train"], args.out_dir / "augmented"))
    config = TrainingConfig(
        objective=args.objective,
        data=DataOptions(
            train=train_data, dev=f"stsb:{files['stsb_dev']}", test=f"stsb:{files['stsb_test']}"
        ),
        output_dir=output,
        model=args.model,
        optimization=OptimizationOptions(
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            seed=args.seed,
            max_steps=args.max_steps,
        ),
        run=RunOptions(eval_every=args.eval_every, device="cpu", show_progress=sys.stderr.isatty()),
    )
    result = train(config, overwrite=args.overwrite)
    after = result.test_metrics or {}
    payload = {
        "benchmark": "train_stsb",
        "objective": args.objective,
        "model": args.model,
        "options": {key: str(value) for key, value in vars(args).items()},
        "before_test": before,
        "after_test": after,
        "dev_best": result.dev_best,
        "dev_best_step": result.dev_best_step,
        "steps": result.steps,
        "training_seconds": round(result.seconds, 1),
        "seconds_per_step": round(result.seconds / max(result.steps, 1), 3),
        "resumed_from": result.resumed_from,
        "wall_seconds": round(time.monotonic() - started, 1),
        "model_dir": str(output),
        "silver": silver,
        "environment": environment(),
    }
    path = record(args, "train_stsb", payload)
    print(
        markdown_table(
            ["model", "STS-B dev (best)", "STS-B test spearman_cosine", "steps", "training time"],
            [
                [args.model, "-", f"{before['spearman_cosine']:.4f}", "-", "-"],
                [
                    f"{args.objective} fine-tuned",
                    f"{result.dev_best:.4f} (step {result.dev_best_step})",
                    f"{after.get('spearman_cosine', float('nan')):.4f}",
                    result.steps,
                    f"{result.seconds:.0f} s",
                ],
            ],
        )
    )
    print(f"figures in {path}")


def with_sick(train: str, sick_path: Path, folder: Path) -> Path:
    """The training pairs of `train` (stsb:PATH or a Parquet file) and SICK's, as Parquet."""
    pairs = read_stsb(train[5:]) if train.startswith("stsb:") else pq.read_table(train).to_pydict()
    sick = read_sick(sick_path)
    table = pa.table(
        {name: list(pairs[name]) + list(sick[name]) for name in ("sentence1", "sentence2", "score")}
    )
    path = folder / f"{Path(train.removeprefix('stsb:')).name.split('.')[0]}_and_sick.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    print(
        f"training pairs: {table.num_rows} ({len(sick['score'])} from SICK) in {path}", flush=True
    )
    return path


def augmented_train_file(gold_path: Path, args) -> tuple[Path, dict]:
    """Gold STS-B train pairs plus `--silver-pairs` cross-encoder-scored ones, as Parquet."""
    started = time.monotonic()
    gold = read_stsb(gold_path)
    sentences = sorted(set(gold["sentence1"]) | set(gold["sentence2"]))
    vectors = BiEncoder.load(args.model, device="cpu").encode(sentences)
    # the library's exact k-NN; each sentence finds itself, which is dropped
    found = ExactSearch(vectors, "dot").search(vectors, args.neighbours + 1)[1]
    own = found == np.arange(len(found))[:, None]
    own[~own.any(axis=1), -1] = True  # a row tied out of its own top: drop the farthest
    nearest = found[~own].reshape(len(found), -1)
    known = {frozenset(pair) for pair in zip(gold["sentence1"], gold["sentence2"])}
    candidates = sorted(
        {
            (min(i, j), max(i, j))
            for i, row in enumerate(nearest)
            for j in row
            if frozenset((sentences[i], sentences[j])) not in known
        }
    )
    chosen = np.random.default_rng(args.seed).permutation(len(candidates))[: args.silver_pairs]
    pairs = [(sentences[candidates[c][0]], sentences[candidates[c][1]]) for c in chosen]
    scores = CrossEncoder.load(str(args.cross_encoder), device="cpu").predict(pairs)
    table = pa.table(
        {
            "sentence1": gold["sentence1"] + [a for a, _ in pairs],
            "sentence2": gold["sentence2"] + [b for _, b in pairs],
            "score": [float(score) for score in gold["score"]] + scores.astype(float).tolist(),
        }
    )
    path = args.out_dir / "augmented" / f"stsb_train_silver{len(pairs)}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    facts = {
        "file": str(path),
        "gold_pairs": len(gold["score"]),
        "silver_pairs": len(pairs),
        "candidates": len(candidates),
        "neighbours": args.neighbours,
        "cross_encoder": str(args.cross_encoder),
        "silver_score_mean": float(scores.mean()),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(f"silver data: {facts}", flush=True)
    return path, facts


if __name__ == "__main__":
    main()
