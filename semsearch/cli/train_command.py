"""`semsearch train`: fine-tune a bi-encoder (or train a cross-encoder) on one dataset or a plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from semsearch.cli.common import app, console, show_progress, user_errors
from semsearch.cli.options import (
    Columns,
    Device,
    JsonFlag,
    ModelOutput,
    ObjectiveOptions,
    parse_assignments,
    parse_options,
)
from semsearch.cli.output import print_json_lines, print_mapping
from semsearch.errors import SemsearchError
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.options import CROSS_METRICS, OBJECTIVES

if TYPE_CHECKING:
    from semsearch.training import TrainingConfig, TrainingResult
    from semsearch.training.plan import TrainingPlan

# Test metrics the summary shows (each similarity's and each set's, for a plan).
SHOWN_METRICS = ("spearman_cosine", "cosine_ap", "ndcg@10")

DataSource = Annotated[
    str | None,
    typer.Argument(
        help="A corpus file (.parquet, .csv, .tsv, .jsonl, optionally .gz), or "
        "stsb:PATH / sick:PATH for the STS-B and SICK files (or give --plan)."
    ),
]
Plan = Annotated[
    Path | None,
    typer.Option(
        help="A YAML or JSON training plan: several datasets, each with its own "
        "objective (e.g. cosent on STS-B and mnr on retrieval pairs), batches mixed "
        "round-robin or proportionally, and dev sets whose metrics combine to pick the "
        "best checkpoint (see the README). Replaces DATA, --objective, --column, --form, "
        "--dev, --test and the other data options."
    ),
]
# Options a plan gives per dataset: with --plan, setting one of them on the command line is a
# mistake (the value the user typed would be ignored). Name -> its default here.
PLAN_OWNS = {
    "objective": None,
    "column": None,
    "form": "none",
    "positive_at": 0.8,
    "score_max": None,
    "dev_task": "auto",
    "option": None,
    "dev": None,
    "test": None,
}
Objective = Annotated[
    str | None,
    typer.Option(
        help=f"One of {', '.join(OBJECTIVES)}; with --cross-encoder bce (the default) or softmax."
    ),
]
CrossEncoderFlag = Annotated[
    bool,
    typer.Option(
        "--cross-encoder",
        help="Train a cross-encoder (a new head on MODEL's "
        "transformer, reading both texts of a pair) instead of a bi-encoder.",
    ),
]
StartingModel = Annotated[
    str, typer.Option(help="Starting model: 'default', a folder or a hub name.")
]
Dev = Annotated[
    str | None, typer.Option(help="Dev data (same forms as DATA); the best model on it is kept.")
]
Test = Annotated[str | None, typer.Option(help="Test data, measured once with the kept model.")]
Form = Annotated[
    str, typer.Option(help="Derive examples from scored pairs: none, positives, triplets, binary.")
]
PositiveAt = Annotated[
    float, typer.Option(help="With --form, a score at least this is a positive.")
]
ScoreMax = Annotated[
    float | None, typer.Option(help="Divide the score column by this (5 for 0-5 scores).")
]
DevTask = Annotated[str, typer.Option(help="How dev/test are measured: auto, sts, pairs, ir.")]
Pooling = Annotated[
    str | None, typer.Option(help="Replace the model's pooling: mean, max, cls, attention.")
]
Normalize = Annotated[
    bool | None,
    typer.Option(
        "--normalize/--no-normalize", help="L2-normalise vectors (default: as the model does)."
    ),
]
Epochs = Annotated[int, typer.Option(help="Passes over the training data.")]
BatchSize = Annotated[int, typer.Option(help="Examples per step.")]
LearningRate = Annotated[float, typer.Option("--lr", "--learning-rate", help="Peak learning rate.")]
Warmup = Annotated[float, typer.Option(help="Share of the steps with a linear warm-up.")]
WeightDecay = Annotated[float, typer.Option(help="AdamW weight decay.")]
MaxGradNorm = Annotated[float, typer.Option(help="Clip gradients to this norm.")]
Seed = Annotated[int, typer.Option(help="Seed of the shuffling, sampling and initialisation.")]
MaxSteps = Annotated[
    int | None, typer.Option(help="Train exactly this many steps (overrides --epochs).")
]
EvalEvery = Annotated[
    int, typer.Option(help="Also measure dev every N steps (0: at epoch ends only).")
]
CheckpointEvery = Annotated[int, typer.Option(help="Save the resumable state every N steps.")]
Precision = Annotated[str, typer.Option(help="auto (bf16 on CUDA, fp32 on CPU), fp32, bf16, fp16.")]
Overwrite = Annotated[bool, typer.Option(help="Replace a finished or interrupted run in OUTPUT.")]


@app.command()
@user_errors
def train(
    data: DataSource = None,
    output: ModelOutput = ...,  # type: ignore[assignment]
    plan: Plan = None,
    objective: Objective = None,
    cross_encoder: CrossEncoderFlag = False,
    model: StartingModel = DEFAULT_MODEL,
    dev: Dev = None,
    test: Test = None,
    column: Columns = None,
    form: Form = "none",
    positive_at: PositiveAt = 0.8,
    score_max: ScoreMax = None,
    dev_task: DevTask = "auto",
    option: ObjectiveOptions = None,
    pooling: Pooling = None,
    normalize: Normalize = None,
    epochs: Epochs = 1,
    batch_size: BatchSize = 16,
    learning_rate: LearningRate = 2e-5,
    warmup: Warmup = 0.1,
    weight_decay: WeightDecay = 0.01,
    max_grad_norm: MaxGradNorm = 1.0,
    seed: Seed = 0,
    max_steps: MaxSteps = None,
    eval_every: EvalEvery = 0,
    checkpoint_every: CheckpointEvery = 200,
    precision: Precision = "auto",
    device: Device = "auto",
    overwrite: Overwrite = False,
    json_output: JsonFlag = False,
) -> None:
    """Fine-tune a bi-encoder on DATA with a siamese objective (or, with --cross-encoder, train
    a cross-encoder on its pairs), or on the several datasets of a --plan; OUTPUT becomes a
    model folder.

    A --plan file (YAML or JSON), e.g. cosent on STS-B with mnr on query/doc pairs:
      datasets: a list of {source, objective, columns, options, weight}
      mixing:   round-robin | proportional
      dev/test: a list of {source, task: sts|pairs|ir, columns, weight}
    The run keeps the checkpoint with the best weighted mean of the dev sets' metrics.

    An interrupted run resumes from its last checkpoint when the same command is run again.
    """
    config = TrainRequest(**locals()).config()  # first: locals() are the options alone
    from semsearch.training import train as train_bi_encoder
    from semsearch.training.cross_trainer import train_cross_encoder

    run = train_cross_encoder if cross_encoder else train_bi_encoder
    result = run(config, overwrite=overwrite)
    if json_output:
        print_json_lines([result.to_dict()])
    else:
        print_mapping("training finished", _summary(result), console)


@dataclass(frozen=True)
class TrainRequest:
    """`semsearch train`'s options as parsed, checked and grouped into a `TrainingConfig`."""

    data: str | None
    output: Path
    plan: Path | None
    objective: str | None
    cross_encoder: bool
    model: str
    dev: str | None
    test: str | None
    column: list[str] | None
    form: str
    positive_at: float
    score_max: float | None
    dev_task: str
    option: list[str] | None
    pooling: str | None
    normalize: bool | None
    epochs: int
    batch_size: int
    learning_rate: float
    warmup: float
    weight_decay: float
    max_grad_norm: float
    seed: int
    max_steps: int | None
    eval_every: int
    checkpoint_every: int
    precision: str
    device: str
    overwrite: bool
    json_output: bool

    def config(self) -> TrainingConfig:
        """The run these options ask for; a missing DATA or --objective is one clear error."""
        training_plan = self._plan()
        if training_plan is None and self.data is None:
            raise SemsearchError("give the training DATA, or --plan FILE for several datasets")
        if self.objective is None and not self.cross_encoder and training_plan is None:
            raise SemsearchError(f"--objective is required: choose one of {', '.join(OBJECTIVES)}")
        from semsearch.training import OptimizationOptions, RunOptions, TrainingConfig

        data = None if training_plan is not None else self._data()
        optimization = OptimizationOptions(
            epochs=self.epochs,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            warmup_fraction=self.warmup,
            weight_decay=self.weight_decay,
            max_grad_norm=self.max_grad_norm,
            seed=self.seed,
            max_steps=self.max_steps,
            precision=self.precision,  # type: ignore[arg-type]
        )
        run = RunOptions(
            eval_every=self.eval_every,
            checkpoint_every=self.checkpoint_every,
            device=self.device,
            show_progress=show_progress() and not self.json_output,
        )
        return TrainingConfig(
            objective=self.objective or "bce",
            data=data,
            output_dir=self.output,
            model=self.model,
            objective_options=parse_options(self.option),
            pooling=self.pooling,
            normalize=self.normalize,
            optimization=optimization,
            run=run,
            plan=training_plan,
        )

    def _data(self):
        """The one dataset of a run without --plan."""
        from semsearch.training import DataOptions

        return DataOptions(
            train=self.data,  # type: ignore[arg-type]
            dev=self.dev,
            test=self.test,
            columns=parse_assignments(self.column, "--column"),
            form=self.form,  # type: ignore[arg-type]
            positive_at=self.positive_at,
            score_max=self.score_max,
            dev_task=self.dev_task,  # type: ignore[arg-type]
        )

    def _plan(self) -> TrainingPlan | None:
        """The --plan file read and checked, refusing the options it replaces; None without it."""
        if self.plan is None:
            return None
        clashes = [name for name, default in PLAN_OWNS.items() if getattr(self, name) != default]
        if self.data is not None:
            clashes.insert(0, "DATA")
        if self.cross_encoder:
            clashes.append("cross-encoder")
        if clashes:
            flags = ", ".join(
                name if name == "DATA" else f"--{name.replace('_', '-')}" for name in clashes
            )
            raise SemsearchError(
                f"--plan gives the datasets, objectives and dev/test sets: drop {flags} "
                "(a plan trains a bi-encoder)"
            )
        from semsearch.training.plan import read_plan

        return read_plan(self.plan)


def _summary(result: TrainingResult) -> dict[str, Any]:
    """What `train` prints once the run ends: the folder, the steps, dev and test figures."""
    summary: dict[str, Any] = {
        "model folder": str(result.output_dir),
        "steps": result.steps,
        "time": f"{result.seconds:.0f} s",
    }
    if result.resumed_from is not None:
        summary["resumed from step"] = result.resumed_from
    if result.dev_primary is not None and result.kept_starting_point:
        trained = result.dev_best_trained
        summary[f"dev {result.dev_primary}"] = (
            f"{result.dev_best:.4f} before training; fine-tuning did not beat it ("
            + ("no step measured" if trained is None else f"best {trained:.4f}")
            + "): the model saved is the starting point"
        )
    elif result.dev_primary is not None:
        summary[f"dev {result.dev_primary} (best)"] = (
            f"{result.dev_best:.4f} at step {result.dev_best_step}"
            + (
                f" (before training {result.dev_before:.4f})"
                if result.dev_before is not None
                else ""
            )
        )
    for name, value in (result.test_metrics or {}).items():
        measure = name.split("/")[-1]  # a plan's test sets report NAME/metric
        if measure.startswith(SHOWN_METRICS) or measure in CROSS_METRICS or name == "combined":
            summary[f"test {name}"] = f"{value:.4f}"
    return summary
