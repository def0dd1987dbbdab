"""`semsearch eval sts|pairs|ir|self|heatmap`: measure a model folder, or the model of an index.

Each subcommand calls its function in `semsearch.evaluate` and prints a table (one JSON
line with `--json`); `--out` also writes the figures to a JSON file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from semsearch.cli.common import DEFAULT_INDEX_DIR, App, app, console, show_progress, user_errors
from semsearch.cli.options import (
    Columns,
    Device,
    IndexDir,
    IndexOption,
    JsonFlag,
    Quantize,
    parse_assignments,
    required_index,
)
from semsearch.options import (
    DEFAULT_ALPHA,
    DEFAULT_FUSION,
    DEFAULT_RERANK_TOP,
    FUSION_METHODS,
    SIMILARITIES,
)

if TYPE_CHECKING:
    from semsearch.evaluate import EvaluationResult

eval_app = App(help="Measure a model (or an index's model) on labelled data.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")

Model = Annotated[
    str | None, typer.Option(help="A model folder, hub name or 'default' (the default).")
]
Index = Annotated[
    str | None, typer.Option(help="Measure the model of this index (name or folder) instead.")
]
Out = Annotated[Path | None, typer.Option(help="Also write the figures to this JSON file.")]
BatchSize = Annotated[int, typer.Option(help="Texts per forward pass.")]
QueryPrompt = Annotated[
    str | None,
    typer.Option(
        help="Text put before each query, and in sts and pairs before both sides (the e5/bge "
        "convention for symmetric tasks); default: the model folder's prompt named 'query' "
        "(or the index's); '' for none.",
        show_default=False,
    ),
]
DocumentPrompt = Annotated[
    str | None,
    typer.Option(
        help="Text put before each corpus document; default: the model folder's prompt named "
        "'document' (or the index's); '' for none.",
        show_default=False,
    ),
]
ScoreMax = Annotated[float | None, typer.Option(help="Divide the score column by this.")]


@eval_app.command("sts")
@user_errors
def sts(
    data: Annotated[
        str,
        typer.Argument(help="stsb:PATH, sick:PATH, or a file with sentence1, sentence2, score."),
    ],
    column: Columns = None,
    score_max: ScoreMax = None,
    model: Model = None,
    index: Index = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    device: Device = "auto",
    batch_size: BatchSize = 64,
    quantize: Quantize = None,
    query_prompt: QueryPrompt = None,
    out: Out = None,
    json_output: JsonFlag = False,
) -> None:
    """Spearman and Pearson correlation of four similarities with graded pairs (both sides
    after the query prompt: the e5/bge convention for symmetric tasks)."""
    from semsearch.evaluate import ModelOptions, evaluate_sts

    columns = parse_assignments(column, "--column")
    chosen = ModelOptions(
        model=model,
        index=index,
        index_dir=index_dir,
        device=device,
        quantization=quantize,
        batch_size=batch_size,
        show_progress=show_progress(json_output),
        query_prompt=query_prompt,
    )
    _report(evaluate_sts(data, chosen, columns, score_max), out, json_output)


@eval_app.command("pairs")
@user_errors
def pairs(
    dev: Annotated[
        str,
        typer.Argument(
            help="Pairs with sentence1, sentence2 and a 0/1 label; thresholds are chosen here."
        ),
    ],
    test: Annotated[
        str | None, typer.Option(help="Pairs to apply the dev thresholds to (default: dev itself).")
    ] = None,
    column: Columns = None,
    model: Model = None,
    index: Index = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    device: Device = "auto",
    batch_size: BatchSize = 64,
    query_prompt: QueryPrompt = None,
    out: Out = None,
    json_output: JsonFlag = False,
) -> None:
    """Duplicate / not: accuracy, F1, precision, recall at dev thresholds; average precision
    (both sides after the query prompt: the e5/bge convention for symmetric tasks)."""
    from semsearch.evaluate import ModelOptions, evaluate_pairs

    columns = parse_assignments(column, "--column")
    chosen = ModelOptions(
        model=model,
        index=index,
        index_dir=index_dir,
        device=device,
        batch_size=batch_size,
        show_progress=show_progress(json_output),
        query_prompt=query_prompt,
    )
    _report(evaluate_pairs(dev, chosen, test, columns), out, json_output)


BeirFolder = Annotated[
    Path,
    typer.Argument(help="A BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv (or .gz)."),
]
Split = Annotated[str, typer.Option(help="Which qrels file to read.")]
SearchIndex = Annotated[
    bool,
    typer.Option(
        help="Rank with the --index itself (built from corpus.jsonl with --id-column _id)."
    ),
]
Rerank = Annotated[
    str | None,
    typer.Option(
        help="A cross-encoder folder that re-orders each query's first --rerank-top documents, in each mode; the report says per mode whether it raised or lowered nDCG@10."
    ),
]
RerankTop = Annotated[int, typer.Option(help="Documents per query for --rerank to re-order.")]
FusionMethod = Annotated[
    str, typer.Option(help=f"How the hybrid row fuses: {' | '.join(FUSION_METHODS)}.")
]
Alpha = Annotated[
    float,
    typer.Option(help="The dense side's weight in --fusion convex, its least in adaptive."),
]
TuneAlpha = Annotated[
    bool,
    typer.Option(
        help="Also tune convex fusion's alpha on a dev split of the queries and report it."
    ),
]


@eval_app.command("ir")
@user_errors
def ir(
    folder: BeirFolder,
    split: Split = "test",
    search_index: SearchIndex = False,
    rerank: Rerank = None,
    rerank_top: RerankTop = DEFAULT_RERANK_TOP,
    fusion: FusionMethod = DEFAULT_FUSION,
    alpha: Alpha = DEFAULT_ALPHA,
    tune_alpha: TuneAlpha = False,
    model: Model = None,
    index: Index = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    device: Device = "auto",
    batch_size: BatchSize = 64,
    quantize: Quantize = None,
    query_prompt: QueryPrompt = None,
    document_prompt: DocumentPrompt = None,
    out: Out = None,
    json_output: JsonFlag = False,
) -> None:
    """nDCG@10, MRR@10, recall@1/10/100 and MAP@100 on a BEIR-format folder, for dense,
    lexical (BM25) and hybrid retrieval side by side (queries after the query prompt, the
    corpus after the document prompt)."""
    from semsearch.evaluate import ModelOptions, evaluate_ir
    from semsearch.search.hybrid import Fusion

    chosen = ModelOptions(
        model=model,
        index=index,
        index_dir=index_dir,
        device=device,
        quantization=quantize,
        batch_size=batch_size,
        query_prompt=query_prompt,
        document_prompt=document_prompt,
    )
    fused = Fusion(fusion, alpha=alpha)
    result = evaluate_ir(folder, chosen, split, search_index, rerank, rerank_top, fused, tune_alpha)
    if "before_rerank" in result.facts and not json_output:
        console.print(f"before re-ranking: ndcg@10 {result.facts['before_rerank']['ndcg@10']:.4f}")
    if "modes" in result.facts and not json_output:
        _report_modes(result)
        _write_json(out, result.to_dict())
        return
    _report(result, out, json_output)


def _report_modes(result: EvaluationResult) -> None:
    """A header, then one row per retrieval mode, and the tuned alpha if there is one."""
    facts = result.facts
    console.print(
        f"[bold]{result.task}[/bold]: {escape(result.model)} on {escape(facts['data'])} "
        f"({result.seconds:.1f} s)"
    )
    table = Table()
    table.add_column("mode", style="bold")
    measures = [name for name in result.metrics if name != "queries"]
    for measure in measures:
        table.add_column(measure, justify="right")
    for mode, metrics in facts["modes"].items():
        table.add_row(escape(mode), *[_cell(metrics.get(measure)) for measure in measures])
    console.print(table)
    if "fusion" in facts:  # what the hybrid row's ranking is made of, in a line
        from semsearch.search.hybrid import Fusion, describe

        console.print(describe(Fusion(**facts["fusion"])), markup=False)
    for verdict in facts.get("rerank_verdicts", ()):
        style = "bold red" if " LOWERS " in verdict else "green"
        console.print(f"[{style}]{escape(verdict)}[/{style}]")
    tuned = facts.get("tuned_alpha")
    if tuned:
        console.print(
            f"convex alpha tuned on every query: {tuned['all_queries']:g} (on each fold's "
            f"dev half: {', '.join(f'{a:g}' for a in tuned['folds'])}); query with "
            f"--mode hybrid --fusion convex --alpha {tuned['all_queries']:g}"
        )


@eval_app.command("self")
@user_errors
def self_check(
    name: Annotated[
        str | None,
        typer.Argument(help="A chunked index of documents (name or folder).", show_default=False),
    ] = None,
    index: IndexOption = None,
    sample: Annotated[int, typer.Option(help="Sentences to ask, one per document.")] = 500,
    seed: Annotated[int, typer.Option(help="Which documents and sentences are drawn.")] = 0,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    device: Device = "auto",
    out: Out = None,
    json_output: JsonFlag = False,
) -> None:
    """Recall@10 and MRR@10 by document of sentences (8+ words) that occur in one indexed
    document only, past the model's first window where it has any: whether the model and
    the chunking fit the corpus, with no labelled query."""
    from semsearch.evaluate import ModelOptions, evaluate_self

    chosen = ModelOptions(
        index=required_index(name, index, "eval self"), index_dir=index_dir, device=device
    )
    result = evaluate_self(chosen, sample, seed)
    _report(result, out, json_output)
    if not json_output:
        facts = result.facts
        console.print(
            f"{result.metrics['queries']} sentences asked, {facts['past_first_window']} of them "
            f"past the model's first window; {facts['documents_with_own_sentence']} of "
            f"{facts['documents']} documents have a sentence of their own",
            markup=False,
        )


@eval_app.command("heatmap")
@user_errors
def heatmap(
    sentences: Annotated[
        Path, typer.Argument(help="A text file, one sentence per line (2 or more).")
    ],
    png: Annotated[Path, typer.Option(help="Where to write the PNG.")] = Path("heatmap.png"),
    title: Annotated[str, typer.Option(help="A title for the figure.")] = "",
    model: Model = None,
    index: Index = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    device: Device = "auto",
    out: Out = None,
) -> None:
    """A PNG of the cosine similarity of every pair of sentences, and the matrix as a table."""
    from semsearch.evaluate import ModelOptions, evaluate_heatmap

    chosen = ModelOptions(model=model, index=index, index_dir=index_dir, device=device)
    result = evaluate_heatmap(sentences, png, chosen, title)
    console.print(f"[bold]heatmap[/bold]: cosine similarity, {result.model}")
    table = Table()
    table.add_column("#", justify="right")
    table.add_column("sentence", overflow="fold", max_width=50)
    for number in range(len(result.sentences)):
        table.add_column(str(number), justify="right")
    for number, (text, row) in enumerate(zip(result.sentences, result.matrix)):
        table.add_row(
            str(number), escape(text), *[f"{value:.2f}" for value in row]
        )  # text, not markup
    console.print(table)
    console.print(f"heat-map written to {png}")
    _write_json(out, result.to_dict())


def _report(result: EvaluationResult, out: Path | None, json_output: bool) -> None:
    """One JSON line, or a header and a table of the metrics; and the JSON file if asked."""
    payload = result.to_dict()
    if json_output:
        typer.echo(json.dumps(payload, default=float))
    else:
        facts = result.facts
        data = facts.get("data") or facts.get("test") or facts.get("dev")
        console.print(
            f"[bold]{result.task}[/bold]: {result.model} on {data} ({result.seconds:.1f} s)"
        )
        console.print(metrics_table(result.metrics))
    _write_json(out, payload, quiet=json_output)


def metrics_table(metrics: dict[str, float]) -> Table:
    """Per-similarity metrics as a grid (similarity x measure); anything else as rows."""
    grid: dict[str, dict[str, float]] = {}
    plain: dict[str, float] = {}
    for name, value in metrics.items():
        similarity = next(
            (s for s in SIMILARITIES if name.startswith(f"{s}_") or name.endswith(f"_{s}")), None
        )
        if similarity is None:
            plain[name] = value
            continue
        measure = (
            name.removeprefix(f"{similarity}_")
            if name.startswith(f"{similarity}_")
            else name.removesuffix(f"_{similarity}")
        )
        grid.setdefault(similarity, {})[measure] = value
    table = Table()
    if grid:
        measures = list(dict.fromkeys(m for row in grid.values() for m in row))
        table.add_column("similarity", style="bold")
        for measure in measures:
            table.add_column(measure, justify="right")
        for similarity, row in grid.items():
            table.add_row(similarity, *[_cell(row.get(m)) for m in measures])
        return table
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    for name, value in plain.items():
        table.add_row(name, _cell(value))
    return table


def _cell(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.0f}" if float(value).is_integer() and abs(value) > 1 else f"{value:.4f}"


def _write_json(out: Path | None, payload: dict, quiet: bool = False) -> None:
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, default=float) + "\n", encoding="utf-8")
    if not quiet:
        console.print(f"figures written to {out}")
