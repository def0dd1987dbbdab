"""`semsearch train` (fine-tune a bi-encoder) and `semsearch train-adapter` (an MLP on vectors)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from semsearch.cli.common import (
    DEFAULT_INDEX_DIR,
    Device,
    IndexDir,
    JsonFlag,
    app,
    console,
    show_progress,
    user_errors,
)
from semsearch.cli.output import print_json_lines, print_mapping
from semsearch.errors import SemsearchError
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.options import CROSS_METRICS, OBJECTIVES

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
Columns = Annotated[
    list[str] | None,
    typer.Option(
        "--column",
        help="NAME=FILE_COLUMN: read the objective's column NAME from "
        "FILE_COLUMN (repeatable), e.g. --column sentence1=question.",
    ),
]
ObjectiveOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        help="KEY=VALUE passed to the objective (repeatable; VALUE is read "
        "as JSON when it parses), e.g. --option margin=0.5 --option symmetric=true.",
    ),
]


@app.command()
@user_errors
def train(
    data: DataSource = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The model folder to write.")
    ] = ...,  # type: ignore[assignment]
    plan: Plan = None,
    objective: Annotated[
        str | None,
        typer.Option(
            help=f"One of {', '.join(OBJECTIVES)}; with --cross-encoder bce "
            "(the default) or softmax."
        ),
    ] = None,
    cross_encoder: Annotated[
        bool,
        typer.Option(
            "--cross-encoder",
            help="Train a cross-encoder (a new head on MODEL's "
            "transformer, reading both texts of a pair) instead of a bi-encoder.",
        ),
    ] = False,
    model: Annotated[
        str, typer.Option(help="Starting model: 'default', a folder or a hub name.")
    ] = DEFAULT_MODEL,
    dev: Annotated[
        str | None,
        typer.Option(help="Dev data (same forms as DATA); the best model on it is kept."),
    ] = None,
    test: Annotated[
        str | None, typer.Option(help="Test data, measured once with the kept model.")
    ] = None,
    column: Columns = None,
    form: Annotated[
        str,
        typer.Option(help="Derive examples from scored pairs: none, positives, triplets, binary."),
    ] = "none",
    positive_at: Annotated[
        float, typer.Option(help="With --form, a score at least this is a positive.")
    ] = 0.8,
    score_max: Annotated[
        float | None, typer.Option(help="Divide the score column by this (5 for 0-5 scores).")
    ] = None,
    dev_task: Annotated[
        str, typer.Option(help="How dev/test are measured: auto, sts, pairs, ir.")
    ] = "auto",
    option: ObjectiveOptions = None,
    pooling: Annotated[
        str | None, typer.Option(help="Replace the model's pooling: mean, max, cls, attention.")
    ] = None,
    normalize: Annotated[
        bool | None,
        typer.Option(
            "--normalize/--no-normalize", help="L2-normalise vectors (default: as the model does)."
        ),
    ] = None,
    epochs: Annotated[int, typer.Option(help="Passes over the training data.")] = 1,
    batch_size: Annotated[int, typer.Option(help="Examples per step.")] = 16,
    learning_rate: Annotated[
        float, typer.Option("--lr", "--learning-rate", help="Peak learning rate.")
    ] = 2e-5,
    warmup: Annotated[float, typer.Option(help="Share of the steps with a linear warm-up.")] = 0.1,
    weight_decay: Annotated[float, typer.Option(help="AdamW weight decay.")] = 0.01,
    max_grad_norm: Annotated[float, typer.Option(help="Clip gradients to this norm.")] = 1.0,
    seed: Annotated[
        int, typer.Option(help="Seed of the shuffling, sampling and initialisation.")
    ] = 0,
    max_steps: Annotated[
        int | None, typer.Option(help="Train exactly this many steps (overrides --epochs).")
    ] = None,
    eval_every: Annotated[
        int, typer.Option(help="Also measure dev every N steps (0: at epoch ends only).")
    ] = 0,
    checkpoint_every: Annotated[
        int, typer.Option(help="Save the resumable state every N steps.")
    ] = 200,
    precision: Annotated[
        str, typer.Option(help="auto (bf16 on CUDA, fp32 on CPU), fp32, bf16, fp16.")
    ] = "auto",
    device: Device = "auto",
    overwrite: Annotated[
        bool, typer.Option(help="Replace a finished or interrupted run in OUTPUT.")
    ] = False,
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
    given = {
        "objective": objective,
        "column": column,
        "form": form,
        "positive_at": positive_at,
        "score_max": score_max,
        "dev_task": dev_task,
        "option": option,
        "dev": dev,
        "test": test,
    }
    training_plan = _read_plan(plan, data, cross_encoder, given)
    if training_plan is None and data is None:
        raise SemsearchError("give the training DATA, or --plan FILE for several datasets")
    if objective is None and not cross_encoder and training_plan is None:
        raise SemsearchError(f"--objective is required: choose one of {', '.join(OBJECTIVES)}")
    from semsearch.training import (
        DataOptions,
        OptimizationOptions,
        RunOptions,
        TrainingConfig,
    )
    from semsearch.training import train as run_training
    from semsearch.training.cross_trainer import train_cross_encoder

    data_options = (
        None
        if training_plan is not None
        else DataOptions(
            train=data,
            dev=dev,
            test=test,
            columns=parse_assignments(column, "--column"),
            form=form,  # type: ignore[arg-type]
            positive_at=positive_at,
            score_max=score_max,
            dev_task=dev_task,
        )
    )  # type: ignore[arg-type]
    optimization = OptimizationOptions(
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        warmup_fraction=warmup,
        weight_decay=weight_decay,
        max_grad_norm=max_grad_norm,
        seed=seed,
        max_steps=max_steps,
        precision=precision,
    )  # type: ignore[arg-type]
    run = RunOptions(
        eval_every=eval_every,
        checkpoint_every=checkpoint_every,
        device=device,
        show_progress=show_progress() and not json_output,
    )
    config = TrainingConfig(
        objective=objective or "bce",
        data=data_options,
        output_dir=output,
        model=model,
        objective_options=parse_options(option),
        pooling=pooling,
        normalize=normalize,
        optimization=optimization,
        run=run,
        plan=training_plan,
    )
    result = (train_cross_encoder if cross_encoder else run_training)(config, overwrite=overwrite)
    if json_output:
        print_json_lines([result.to_dict()])
        return
    summary = {
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
    print_mapping("training finished", summary, console)


def _read_plan(plan: Path | None, data: str | None, cross_encoder: bool, given: dict[str, Any]):
    """The --plan file read and checked, refusing the options it replaces; None without it."""
    if plan is None:
        return None
    clashes = [name for name, value in given.items() if value != PLAN_OWNS[name]]
    if data is not None:
        clashes.insert(0, "DATA")
    if cross_encoder:
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

    return read_plan(plan)


@app.command("train-adapter")
@user_errors
def train_adapter_command(
    pairs: Annotated[
        str,
        typer.Argument(
            help="Pairs: a corpus file with row1, row2 (vector row numbers) and a 0/1 label."
        ),
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Folder for adapter.safetensors and adapter.json."),
    ],
    vectors: Annotated[
        Path | None, typer.Option(help="A .npy file of vectors [rows, dimension].")
    ] = None,
    index: Annotated[
        str | None, typer.Option(help="Or the index (name or folder) whose vectors to use.")
    ] = None,
    objective: Annotated[
        str, typer.Option(help="contrastive, online-contrastive or bce.")
    ] = "contrastive",
    column: Columns = None,
    option: ObjectiveOptions = None,
    hidden: Annotated[
        int | None, typer.Option(help="Width of the MLP's hidden layer (default: the vectors').")
    ] = None,
    epochs: Annotated[int, typer.Option(help="Passes over the pairs.")] = 20,
    batch_size: Annotated[int, typer.Option(help="Pairs per step.")] = 64,
    learning_rate: Annotated[
        float, typer.Option("--lr", "--learning-rate", help="AdamW learning rate.")
    ] = 1e-3,
    seed: Annotated[int, typer.Option(help="Seed of the initialisation and shuffling.")] = 0,
    overwrite: Annotated[bool, typer.Option(help="Replace an adapter already in OUTPUT.")] = False,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: JsonFlag = False,
) -> None:
    """Train an MLP adapter on ready-made vectors (no model needed) from labelled pairs."""
    from semsearch.training import AdapterConfig, load_vectors, read_vector_pairs, train_adapter

    config = AdapterConfig(
        objective=objective,
        objective_options=parse_options(option),
        hidden=hidden,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
    )
    if output.exists() and any(output.iterdir()) and not overwrite:
        raise SemsearchError(
            f"output folder {output} is not empty: pass --overwrite or choose another"
        )
    table = load_vectors(vectors, index, index_dir)
    labelled = read_vector_pairs(pairs, len(table), parse_assignments(column, "--column"))
    result = train_adapter(table, labelled, config, output)
    if json_output:
        print_json_lines([result.to_dict()])
        return
    print_mapping(
        "adapter trained",
        {
            "folder": str(result.output_dir),
            "pairs": result.pairs,
            "vectors": f"{len(table)} x {table.shape[1]}",
            f"{config.objective} loss": f"{result.loss_before:.4f} -> {result.loss_after:.4f}",
            "time": f"{result.seconds:.1f} s",
        },
        console,
    )


def parse_assignments(values: list[str] | None, flag: str) -> dict[str, str]:
    """["a=b", ...] -> {"a": "b"}; anything without '=' is one clear error."""
    pairs = {}
    for value in values or []:
        name, equals, target = value.partition("=")
        if not equals or not name.strip() or not target.strip():
            raise SemsearchError(f"{flag} expects NAME=VALUE, got {value!r}")
        pairs[name.strip()] = target.strip()
    return pairs


def parse_options(values: list[str] | None) -> dict[str, Any]:
    """--option values, each VALUE read as JSON (numbers, true/false, lists) or kept as text."""
    options: dict[str, Any] = {}
    for name, text in parse_assignments(values, "--option").items():
        try:
            options[name.replace("-", "_")] = json.loads(text)
        except json.JSONDecodeError:
            options[name.replace("-", "_")] = text
    return options
