"""`semsearch interpolate`: a model between a base and its fine-tuned copy, in weight space."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from semsearch.cli.common import app, console, user_errors


@app.command("interpolate")
@user_errors
def interpolate(
    base: Annotated[
        str, typer.Argument(help="The model fine-tuning started from (name or folder).")
    ],
    tuned: Annotated[str, typer.Argument(help="The fine-tuned model folder.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The model folder to write.")],
    weight: Annotated[
        float, typer.Option(help="0 gives the base, 1 the tuned model; pick it on dev data.")
    ] = 0.5,
) -> None:
    """Write base + WEIGHT * (tuned - base): keeps much of what fine-tuning gained on its task
    and gives back part of what it cost elsewhere (WiSE-FT). Evaluate a few weights with
    `semsearch eval` and keep the best on your dev data."""
    from semsearch.models.interpolate import interpolate_models

    interpolate_models(base, tuned, weight, output)
    console.print(f"{output}: {base} + {weight:g} x ({tuned} - {base})", highlight=False)
