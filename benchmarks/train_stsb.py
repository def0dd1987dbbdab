"""Fine-tune the default model on STS-B train, select on STS-B dev, report STS-B test.

    python benchmarks/train_stsb.py --objective cosine --epochs 4      # ~1 h on 2 CPU cores
    python benchmarks/train_stsb.py --objective cosent --epochs 4

Before training, the default model is measured on STS-B test (the anchor's figure is
0.820 Spearman of the cosine). The trained model goes to `out/models/stsb-<objective>/`;
if the run is interrupted, the same command resumes it from its checkpoint. Figures:
`out/train_stsb_<objective>.json`.
"""

from __future__ import annotations

import sys
import time

from training_bench import (
    base_parser,
    data_files,
    environment,
    markdown_table,
    use_threads,
    write_json,
)

from semsearch.evaluation import STSEvaluator, read_stsb
from semsearch.models import BiEncoder
from semsearch.training import DataOptions, TrainingConfig, train


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--objective", default="cosine", help="cosine or cosent (any objective "
                        "that reads sentence1, sentence2, score)")  # fmt: skip
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
    args = parser.parse_args()
    files = data_files(args.data_dir)
    use_threads(args.threads)
    started = time.monotonic()

    test = STSEvaluator.from_columns(read_stsb(files["stsb_test"]), name="stsb-test")
    before_seconds = time.monotonic()
    before = test(BiEncoder.load(args.model, device="cpu"))
    before_seconds = time.monotonic() - before_seconds
    print(f"{args.model} on STS-B test: spearman_cosine {before['spearman_cosine']:.4f} "
          f"({before_seconds:.0f} s)", flush=True)  # fmt: skip

    output = args.out_dir / "models" / f"stsb-{args.objective}"
    config = TrainingConfig(
        objective=args.objective,
        data=DataOptions(train=f"stsb:{files['stsb_train']}", dev=f"stsb:{files['stsb_dev']}",
                         test=f"stsb:{files['stsb_test']}"),  # fmt: skip
        output_dir=output, model=args.model, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.learning_rate, eval_every=args.eval_every, seed=args.seed,
        max_steps=args.max_steps, device="cpu", show_progress=sys.stderr.isatty(),
    )  # fmt: skip
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
        "environment": environment(),
    }
    path = write_json(args.out_dir / f"train_stsb_{args.objective}.json", payload)
    print(markdown_table(
        ["model", "STS-B dev (best)", "STS-B test spearman_cosine", "steps", "training time"],
        [[args.model, "-", f"{before['spearman_cosine']:.4f}", "-", "-"],
         [f"{args.objective} fine-tuned", f"{result.dev_best:.4f} (step {result.dev_best_step})",
          f"{after.get('spearman_cosine', float('nan')):.4f}", result.steps, f"{result.seconds:.0f} s"]],
    ))  # fmt: skip
    print(f"figures in {path}")


if __name__ == "__main__":
    main()
