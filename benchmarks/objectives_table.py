"""What each siamese objective does to the same starting model, on the same step budget.

    python benchmarks/objectives_table.py                      # ~2-3 h on 2 busy CPU cores
    python benchmarks/objectives_table.py --rows cosine,mnr    # some rows only

One row per objective, each trained from the default model for `--steps` steps of 16
examples (default 360: one epoch of STS-B train), then measured on STS-B test and SICK
trial (Spearman of the cosine) against the untrained model. No dev selection: the model
measured is the last step's. Data per row:

- softmax: SICK train, 3 entailment labels;
- softmax-unnormalized: the same without L2 normalisation of the vectors (as SBERT);
- bce, contrastive, online-contrastive: STS-B train as binary pairs (score >= 4 of 5 is 1);
- cosine, cosent: STS-B train with its scores (divided by 5);
- triplet: STS-B pairs scoring >= 4, a negative drawn from the other pairs' sentences;
- mnr: STS-B pairs scoring >= 4, in-batch negatives;
- floor: the default model's architecture with random weights, trained as `cosine`.

Each finished row is one JSON line in `results/objectives_table.jsonl` (the untrained
models' scores one more, row "before"), so an interrupted table resumes at the first row with
no line for these steps and model (and a row's training resumes from its checkpoint).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from common import record, results_file
from results_table import read_lines
from training_bench import (
    base_parser,
    data_files,
    environment,
    markdown_table,
    use_threads,
)

from semsearch.evaluation import STSEvaluator, read_sick, read_stsb
from semsearch.models import BiEncoder
from semsearch.models.model_folder import resolve_model
from semsearch.training import (
    DataOptions,
    OptimizationOptions,
    RunOptions,
    TrainingConfig,
    train,
)

ROWS = (
    "softmax",
    "softmax-unnormalized",
    "bce",
    "contrastive",
    "online-contrastive",
    "cosine",
    "cosent",
    "triplet",
    "mnr",
    "floor",
)


def row_config(
    row: str, files: dict[str, Path], out_dir: Path, steps: int, model: str
) -> TrainingConfig:
    """The objective, data and options of one row of the table."""
    stsb = f"stsb:{files['stsb_train']}"
    objective, data, options, normalize = row, DataOptions(stsb), {}, None
    if row.startswith("softmax"):
        objective, data = "softmax", DataOptions(f"sick:{files['sick_train']}")
        normalize = False if row == "softmax-unnormalized" else None
    elif row in ("bce", "contrastive", "online-contrastive"):
        data = DataOptions(stsb, form="binary", positive_at=0.8)
        if row == "bce":
            options = {"pos_weight": _negatives_per_positive(files["stsb_train"])}
    elif row == "triplet":
        data = DataOptions(stsb, form="triplets", positive_at=0.8)
    elif row == "mnr":
        data = DataOptions(stsb, form="positives", positive_at=0.8)
    elif row == "floor":
        objective, model = "cosine", str(random_model(out_dir / "models" / "random-init"))
    return TrainingConfig(
        objective=objective,
        data=data,
        output_dir=out_dir / "models" / "objectives" / row,
        model=model,
        objective_options=options,
        normalize=normalize,
        optimization=OptimizationOptions(max_steps=steps, batch_size=16),
        run=RunOptions(device="cpu", show_progress=sys.stderr.isatty()),
    )


def random_model(folder: Path) -> Path:
    """The default model's architecture (its config.json) with random weights, saved once."""
    if (folder / "model.safetensors").is_file():
        return folder
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    source = resolve_model("default").path
    torch.manual_seed(0)
    BertModel(BertConfig.from_pretrained(source)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def measure(model: str | Path, evaluators: dict[str, STSEvaluator]) -> dict[str, float]:
    encoder = BiEncoder.load(str(model), device="cpu")
    return {name: evaluator(encoder)["spearman_cosine"] for name, evaluator in evaluators.items()}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=360, help="training steps per row (batch 16)")
    parser.add_argument(
        "--rows", default=",".join(ROWS), help=f"comma-separated, from {', '.join(ROWS)}"
    )
    parser.add_argument("--model", default="default")
    parser.add_argument("--overwrite", action="store_true", help="retrain rows already done")
    args = parser.parse_args()
    files = data_files(args.data_dir)
    use_threads(args.threads)
    rows = [row.strip() for row in args.rows.split(",") if row.strip()]
    unknown = [row for row in rows if row not in ROWS]
    if unknown:
        raise SystemExit(f"unknown rows {unknown}: choose from {', '.join(ROWS)}")
    evaluators = {
        "stsb_test": STSEvaluator.from_columns(read_stsb(files["stsb_test"]), name="stsb-test"),
        "sick_trial": STSEvaluator.from_columns(read_sick(files["sick_trial"]), name="sick-trial"),
    }
    done = {} if args.overwrite else finished_rows(args)
    before = done.get("before", {}).get("scores")
    if before is None:
        before = {"default": measure(args.model, evaluators)}
        record_before(args, before)
    print(f"{args.model} before training: {before['default']}", flush=True)

    for row in rows:
        if row in done:
            continue
        config = row_config(row, files, args.out_dir, args.steps, args.model)
        if row == "floor" and "random" not in before:
            before["random"] = measure(config.model, evaluators)
            record_before(args, before)
        started = time.monotonic()
        result = train(config, overwrite=args.overwrite)
        after = measure(config.output_dir, evaluators)
        training = json.loads((config.output_dir / "training.json").read_text())
        losses = [
            json.loads(line)
            for line in (config.output_dir / "train_log.jsonl").read_text().splitlines()
        ]
        losses = [r["loss"] for r in losses if r["event"] == "train"]
        done[row] = {
            "row": row,
            "model": args.model,
            "steps": args.steps,
            "objective": config.objective,
            "data": training["data"]["train"],
            "objective_options": training["objective_options"],
            "trained_steps": result.steps,
            "before": before["random" if row == "floor" else "default"],
            "after": after,
            "first_loss": losses[0],
            "last_loss": losses[-1],
            "training_seconds": round(result.seconds, 1),
            "wall_seconds": round(time.monotonic() - started, 1),
            "environment": environment(),
        }
        record(args, "objectives_table", done[row])
        print(f"{row}: {after} in {result.seconds:.0f} s", flush=True)

    summary = [done[row] for row in ROWS if row in done]
    table = [
        [
            r["row"],
            r["data"]["source"].split(":")[0]
            + (f" ({r['data']['notes'][0].split(' ')[0]})" if r["data"]["notes"] else ""),
            r["data"]["rows_used"],
            r["trained_steps"],
            f"{r['before']['stsb_test']:.4f}",
            f"{r['after']['stsb_test']:.4f}",
            f"{r['before']['sick_trial']:.4f}",
            f"{r['after']['sick_trial']:.4f}",
            f"{r['training_seconds']:.0f}",
        ]
        for r in summary
    ]
    print(
        markdown_table(
            [
                "objective",
                "data",
                "examples",
                "steps",
                "STS-B test before",
                "after",
                "SICK trial before",
                "after",
                "train s",
            ],
            table,
        )
    )


def finished_rows(args) -> dict[str, dict]:
    """The latest line of each row already measured with these steps and model."""
    lines = read_lines(results_file(args, "objectives_table"))
    return {
        line["row"]: line
        for line in lines
        if line.get("steps") == args.steps and line.get("model") == args.model
    }


def record_before(args, before: dict) -> None:
    record(
        args,
        "objectives_table",
        {"row": "before", "model": args.model, "steps": args.steps, "scores": before},
    )


def _negatives_per_positive(path: Path) -> float:
    scores = read_stsb(path)["score"]
    positives = sum(score >= 0.8 for score in scores)
    return round((len(scores) - positives) / positives, 3)


if __name__ == "__main__":
    main()
