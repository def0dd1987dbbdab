"""`semsearch train-adapter`: an MLP trained on ready-made vectors from labelled pairs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from semsearch.cli.common import DEFAULT_INDEX_DIR, app, console, user_errors
from semsearch.cli.options import (
    Columns,
    IndexDir,
    JsonFlag,
    ObjectiveOptions,
    parse_assignments,
    parse_options,
)
from semsearch.cli.output import print_json_lines, print_mapping
from semsearch.errors import SemsearchError

if TYPE_CHECKING:
    import numpy as np

    from semsearch.training import AdapterResult

VectorPairs = Annotated[
    str,
    typer.Argument(
        help="Pairs: a corpus file with row1, row2 (vector row numbers) and a 0/1 label."
    ),
]
AdapterOutput = Annotated[
    Path,
    typer.Option("--output", "-o", help="Folder for adapter.safetensors and adapter.json."),
]
VectorsFile = Annotated[Path | None, typer.Option(help="A .npy file of vectors [rows, dimension].")]
VectorsIndex = Annotated[
    str | None, typer.Option(help="Or the index (name or folder) whose vectors to use.")
]
AdapterObjective = Annotated[str, typer.Option(help="contrastive, online-contrastive or bce.")]
Hidden = Annotated[
    int | None, typer.Option(help="Width of the MLP's hidden layer (default: the vectors').")
]
Epochs = Annotated[int, typer.Option(help="Passes over the pairs.")]
BatchSize = Annotated[int, typer.Option(help="Pairs per step.")]
LearningRate = Annotated[
    float, typer.Option("--lr", "--learning-rate", help="AdamW learning rate.")
]
Seed = Annotated[int, typer.Option(help="Seed of the initialisation and shuffling.")]
Overwrite = Annotated[bool, typer.Option(help="Replace an adapter already in OUTPUT.")]


@app.command("train-adapter")
@user_errors
def train_adapter_command(
    pairs: VectorPairs,
    output: AdapterOutput,
    vectors: VectorsFile = None,
    index: VectorsIndex = None,
    objective: AdapterObjective = "contrastive",
    column: Columns = None,
    option: ObjectiveOptions = None,
    hidden: Hidden = None,
    epochs: Epochs = 20,
    batch_size: BatchSize = 64,
    learning_rate: LearningRate = 1e-3,
    seed: Seed = 0,
    overwrite: Overwrite = False,
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
    else:
        print_mapping("adapter trained", _summary(result, table, config.objective), console)


def _summary(result: AdapterResult, table: np.ndarray, objective: str) -> dict[str, object]:
    """What `train-adapter` prints: the folder, the data, the loss before and after."""
    return {
        "folder": str(result.output_dir),
        "pairs": result.pairs,
        "vectors": f"{len(table)} x {table.shape[1]}",
        f"{objective} loss": f"{result.loss_before:.4f} -> {result.loss_after:.4f}",
        "time": f"{result.seconds:.1f} s",
    }
