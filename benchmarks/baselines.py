"""The recipes semsearch replaces, measured side by side (issue 17).

Each row (word vectors, frozen and fine-tuned transformers, BiLSTMs, SBERT's Table 6 softmax
grid) trains with one seed and budget and appends its STS-B, SICK and pair-classification
line to `results/baselines.jsonl`; rows already there are skipped, so the grid runs in chunks.

    python benchmarks/baselines.py --list
    python benchmarks/baselines.py --rows avg-minilm-input,frozen-minilm-mean
"""

from __future__ import annotations

import fnmatch
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from common import DEFAULT_OUT_DIR, base_parser, environment, record, results_file
from results_table import read_lines

WORK = DEFAULT_OUT_DIR / "baselines"
VECTORS = {"minilm-input": WORK / "minilm_input.txt.gz", "w2v": WORK / "w2v_debian_pypi.txt.gz"}
BUDGET = {"epochs": 1, "batch_size": 16, "seed": 0, "warmup_fraction": 0.1}
# SBERT's Table 6 feature sets: row-name slug -> (label, pair parts of the softmax head).
FEATURES = {
    "uv": ("(u, v)", ["u", "v"]),
    "diff": ("(|u-v|)", ["abs_diff"]),
    "prod": ("(u*v)", ["product"]),
    "diff-prod": ("(|u-v|, u*v)", ["abs_diff", "product"]),
    "uv-prod": ("(u, v, u*v)", ["u", "v", "product"]),
    "uv-diff": ("(u, v, |u-v|)", ["u", "v", "abs_diff"]),
    "uv-diff-prod": ("(u, v, |u-v|, u*v)", ["u", "v", "abs_diff", "product"]),
}


@dataclass(frozen=True)
class Row:
    """One model to measure: how it is made (and trained), and the similarity it is judged by."""

    name: str
    group: str
    start: str  # "default", "vectors:<source>" (a word model) or "input-embeddings"
    objective: str | None = None
    data: str = "stsb"  # "stsb" (scores), "stsb-binary" (score >= 4) or "sick" (labels)
    options: dict = field(default_factory=dict)
    pooling: str = "mean"
    layer: str = "none"
    normalize: bool | None = None
    learning_rate: float = 2e-5
    similarity: str = "cosine"
    epochs: int | None = None  # None: BUDGET's; more only for rows labelled with it

    @property
    def budget(self) -> dict:
        return {**BUDGET, "epochs": self.epochs or BUDGET["epochs"]}


def rows() -> dict[str, Row]:
    """Every row of the table, in its order."""
    grid = [
        Row("avg-minilm-input", "averaged word vectors", "vectors:minilm-input"),
        Row("avg-w2v", "averaged word vectors", "vectors:w2v"),
        Row("frozen-minilm-cls", "frozen transformer", "default", pooling="cls"),
        Row("frozen-minilm-mean", "frozen transformer", "default"),
        Row("frozen-minilm-input-mean", "frozen transformer", "input-embeddings"),
    ]
    lstm = {"layer": "lstm", "learning_rate": 1e-3, "normalize": False}
    grid += [
        Row(
            "bilstm-l1-sigmoid",
            "siamese BiLSTM",
            "vectors:minilm-input",
            "l1-sigmoid",
            "stsb-binary",
            pooling="max",
            similarity="manhattan",
            **lstm,
        ),
        Row(
            "bilstm-malstm",
            "siamese BiLSTM",
            "vectors:minilm-input",
            "malstm",
            similarity="manhattan",
            **lstm,
        ),
        Row(
            "bilstm-contrastive-euclidean",
            "siamese BiLSTM",
            "vectors:minilm-input",
            "contrastive",
            "stsb-binary",
            {"distance": "euclidean", "margin": 1.0},
            pooling="max",
            similarity="euclidean",
            **lstm,
        ),
        # The BiLSTM's epoch costs ~6 s against the transformer's ~2 min: the same seconds
        # buy it ten epochs, labelled as such.
        Row(
            "bilstm-l1-sigmoid-10ep",
            "siamese BiLSTM, 10 epochs",
            "vectors:minilm-input",
            "l1-sigmoid",
            "stsb-binary",
            pooling="max",
            similarity="manhattan",
            epochs=10,
            **lstm,
        ),
        Row(
            "bilstm-malstm-10ep",
            "siamese BiLSTM, 10 epochs",
            "vectors:minilm-input",
            "malstm",
            similarity="manhattan",
            epochs=10,
            **lstm,
        ),
        Row(
            "minilm-bce-pw2",
            "transformer pair head",
            "default",
            "bce",
            "stsb-binary",
            {"pos_weight": 2.0},
        ),
        Row("minilm-cosine-stsb", "semsearch today", "default", "cosine"),
    ]
    # SBERT's Table 6: the poolings at (u, v, |u-v|), then the feature sets at mean pooling.
    ablation = [(pooling, "uv-diff") for pooling in ("mean", "max", "cls")]
    ablation += [("mean", slug) for slug in FEATURES if slug != "uv-diff"]
    for pooling, slug in ablation:
        label, parts = FEATURES[slug]
        grid.append(
            Row(
                f"softmax-{pooling}-{slug}",
                f"softmax on SICK {label}",
                "default",
                "softmax",
                "sick",
                {"parts": parts},
                pooling=pooling,
                normalize=False,
            )
        )
    return {row.name: row for row in grid}


def main() -> None:
    parser = base_parser(__doc__.split("\n")[0])
    parser.add_argument("--rows", default="", help="comma-separated names or globs (default: all)")
    parser.add_argument("--list", action="store_true", help="list the rows and which are done")
    parser.add_argument("--rerun", action="store_true", help="measure rows already measured")
    args = parser.parse_args()
    grid, done = rows(), measured(args)
    if args.list:
        for name, row in grid.items():
            print(f"{'done' if name in done else '    '}  {name}  ({row.group})")
        return
    for row in select(grid, args.rows):
        if row.name in done and not args.rerun:
            print(f"{row.name}: measured already (--rerun to measure again)", file=sys.stderr)
            continue
        record_row(args, row, measure(row, args.data_dir))


def select(grid: dict[str, Row], patterns: str) -> list[Row]:
    if not patterns:
        return list(grid.values())
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    chosen = [row for name, row in grid.items() if any(fnmatch.fnmatch(name, p) for p in wanted)]
    if not chosen:
        raise SystemExit(f"no row matches {patterns!r}: see --list")
    return chosen


def measured(args) -> dict[str, dict]:
    """The newest result line of each row measured so far."""
    return {line["row"]: line for line in read_lines(results_file(args, "baselines"))}


def record_row(args, row: Row, figures: dict) -> None:
    line = {"row": row.name, "group": row.group, "budget": row.budget, **figures}
    print(json.dumps(line))
    record(args, "baselines", {**line, "environment": environment()})


def measure(row: Row, data_dir: Path) -> dict:
    """Make (and train) the row's model, then evaluate it."""
    from baselines_eval import evaluate_row, input_embedding_encoder

    from semsearch.models import BiEncoder

    folder = WORK / "models" / row.name
    seconds, head = 0.0, None
    if row.start == "input-embeddings":
        encoder = input_embedding_encoder()
    else:
        start = make_start(row)
        if row.objective is None:
            encoder = BiEncoder.load(
                start, pooling=row.pooling if row.start == "default" else None, device="cpu"
            )
        else:
            seconds, head = train_row(row, start, folder, data_dir)
            encoder = BiEncoder.load(str(folder), device="cpu")
    figures = evaluate_row(encoder, row.similarity, data_dir, folder if head else None)
    return {"train_seconds": round(seconds, 1), **figures}


def make_start(row: Row) -> str:
    """The model a row starts from: `default`, or a new word-vector model folder."""
    if not row.start.startswith("vectors:"):
        return row.start
    from sentence_transformers.models.tokenizer import ENGLISH_STOP_WORDS

    from semsearch.models.word_encoder import WordLayerConfig
    from semsearch.models.word_model import WordModelOptions, make_word_model

    source = VECTORS[row.start.split(":", 1)[1]]
    folder = WORK / "models" / f"{row.name}-start"
    options = WordModelOptions(
        layer=WordLayerConfig(row.layer, hidden=128),  # type: ignore[arg-type]
        pooling=row.pooling,
        normalize=bool(row.normalize),
        stop_words=sorted(ENGLISH_STOP_WORDS),
    )
    return str(make_word_model(source, folder, options))


def train_row(row: Row, start: str, folder: Path, data_dir: Path) -> tuple[float, bool]:
    """Train with `semsearch.training.train`; (seconds, whether a pair head was saved)."""
    from semsearch.training import train
    from semsearch.training.config import (
        DataOptions,
        OptimizationOptions,
        RunOptions,
        TrainingConfig,
    )

    sources = {
        "stsb": f"stsb:{data_dir / 'stsb' / 'stsb_train.tsv.gz'}",
        "stsb-binary": f"stsb:{data_dir / 'stsb' / 'stsb_train.tsv.gz'}",
        "sick": f"sick:{data_dir / 'sick' / 'sick_train.tsv.gz'}",
    }
    data = DataOptions(
        train=sources[row.data], form="binary" if row.data == "stsb-binary" else "none"
    )
    config = TrainingConfig(
        objective=row.objective,  # type: ignore[arg-type]
        data=data,
        output_dir=folder,
        model=start,
        objective_options=row.options,
        pooling=row.pooling if row.start == "default" else None,
        normalize=row.normalize,
        optimization=OptimizationOptions(learning_rate=row.learning_rate, **row.budget),
        run=RunOptions(device="cpu", show_progress=False, checkpoint_every=10_000),
    )
    result = train(config, overwrite=True)
    return result.seconds, row.objective in ("bce", "l1-sigmoid")


if __name__ == "__main__":
    main()
