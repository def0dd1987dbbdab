"""`semsearch bench pairs`: the most similar pair among n sentences, cross-encoder vs bi-encoder."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from semsearch.cli.common import App, app, console, show_progress, user_errors
from semsearch.cli.options import Device, JsonFlag
from semsearch.cli.output import print_json_lines
from semsearch.errors import SemsearchError
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.options import DEFAULT_DATA_DIR

if TYPE_CHECKING:
    from semsearch.bench import PairsBenchResult

bench_app = App(
    help="Benchmarks: semsearch's methods measured against each other.", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")

DEFAULT_SIZE = 10_000
SHARED_DATA_SIZES = (1_000, 100_000)  # run after the default size when no size is given


Size = Annotated[
    int | None,
    typer.Option(
        "--n",
        help="Sentences to find the most similar pair among (default: 10000, then the --also sizes).",
    ),
]
AlsoSizes = Annotated[
    str | None,
    typer.Option(
        help="More sizes, comma-separated (default: none when --n or --file is given, else 1000,100000 on the shared data)."
    ),
]
DataDir = Annotated[Path, typer.Option(help="The shared data folder (STS-B, PyPI summaries).")]
SentencesFile = Annotated[
    Path | None, typer.Option(help="Your own sentences instead: a text file, one per line.")
]
CrossEncoderFolder = Annotated[
    str | None,
    typer.Option(
        help="A cross-encoder folder (default: a new head on --model, which costs the same per pair)."
    ),
]
BiEncoderModel = Annotated[
    str, typer.Option(help="The bi-encoder: 'default', a folder or a hub name.")
]
MinPairs = Annotated[
    int, typer.Option(help="Score at least this many random pairs with the cross-encoder...")
]
MinSeconds = Annotated[float, typer.Option(help="...and for at least this long.")]
TopK = Annotated[int, typer.Option(help="Neighbours per sentence the bi-encoder's search keeps.")]
Top = Annotated[int, typer.Option(help="Most similar pairs the bi-encoder reports.")]
BatchSize = Annotated[int, typer.Option(help="Texts (or pairs) per forward pass.")]
Seed = Annotated[int, typer.Option(help="Seed of the sentence sample and the random pairs.")]
OutDir = Annotated[
    Path | None,
    typer.Option(
        help="Write bench_pairs.json and bench_pairs.md into this folder (default: no files, only what is printed)."
    ),
]


@bench_app.command("pairs")
@user_errors
def pairs(
    n: Size = None,
    also: AlsoSizes = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    file: SentencesFile = None,
    cross_encoder: CrossEncoderFolder = None,
    model: BiEncoderModel = DEFAULT_MODEL,
    min_pairs: MinPairs = 2_000,
    min_seconds: MinSeconds = 30.0,
    top_k: TopK = 10,
    top: Top = 100,
    batch_size: BatchSize = 64,
    seed: Seed = 0,
    device: Device = "auto",
    out_dir: OutDir = None,
    json_output: JsonFlag = False,
) -> None:
    """Time to find the most similar pair among n sentences: a cross-encoder scoring every
    pair (measured on a sample, extrapolated) vs a bi-encoder (measured end to end)."""
    from semsearch.bench import PairsBenchOptions, load_sentences, run_pairs_bench
    from semsearch.bench import write_pairs_result as write_result
    from semsearch.bench.report import result_paths

    options = PairsBenchOptions(
        min_pairs=min_pairs,
        min_seconds=min_seconds,
        top_k=top_k,
        top=top,
        batch_size=batch_size,
        seed=seed,
    )
    options.check()
    sizes = _sizes(n, also, file)
    sets = [load_sentences(size, data_dir, file, seed) for size in sizes]
    cross, bi = _load_models(cross_encoder, model, device)
    typer.echo(f"sizes to measure: {', '.join(f'{size:,}' for size in sizes)}", err=True)
    # Written after each size, so that an interrupted run keeps what it measured.
    write = None if out_dir is None else (lambda so_far: write_result(so_far, out_dir))
    progress = show_progress(json_output)
    say = functools.partial(typer.echo, err=True)  # the bench's progress, on stderr
    result = run_pairs_bench(sets, cross, bi, options, say, write, show_progress=progress)
    if json_output:
        print_json_lines([result.to_dict()])
    else:
        _print_result(result)
    if out_dir is not None:
        typer.echo("wrote {} and {}".format(*result_paths(out_dir)), err=json_output)


def _load_models(cross_encoder: str | None, model: str, device: str) -> tuple:
    """The cross-encoder to time (a new head on `model` without a folder), and the bi-encoder."""
    from semsearch.models.bi_encoder import BiEncoder
    from semsearch.models.cross_encoder import CrossEncoder

    if cross_encoder is not None:
        cross = CrossEncoder.load(cross_encoder, device=device)
    else:
        cross = CrossEncoder.from_encoder(model, device=device)
        cross.name = f"untrained head on {model}, same cost per pair"
    return cross, BiEncoder.load(model, device=device)


def _print_result(result: PairsBenchResult) -> None:
    from semsearch.bench.report import (
        HEADERS,
        best_pair_lines,
        models_line,
        pairs_rows,
        quoted_line,
    )

    table = Table(title="[bold]most similar pair among n sentences[/bold]", title_justify="left")
    for header in HEADERS:
        table.add_column(header, overflow="fold")
    for row in pairs_rows(result):
        table.add_row(*row)
    console.print(models_line(result), markup=False)
    console.print(table)
    console.print("most similar pair found by the bi-encoder:")
    for line in [*best_pair_lines(result), quoted_line()]:
        console.print(line, markup=False)


def _sizes(n: int | None, also: str | None, file: Path | None) -> list[int]:
    """The sizes to run, in order: --n (default 10,000), then --also's. Without --also, the
    shared data's extra sizes run only when nothing was asked for: `--n 1000` means 1,000
    sentences, not 1,000 and then 100,000 more encoded without a word."""
    if also is None:
        extra = [] if n is not None or file is not None else list(SHARED_DATA_SIZES)
    else:
        try:
            extra = [int(part) for part in also.replace("_", "").split(",") if part.strip()]
        except ValueError:
            raise SemsearchError(f"--also expects sizes like 1000,100000, not {also!r}") from None
    return [DEFAULT_SIZE if n is None else n, *extra]
