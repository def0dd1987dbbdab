"""`semsearch eval sts|pairs|ir|heatmap`: measure a model folder, or the model of an index.

Each prints a table (one JSON line with `--json`) and, with `--out`, writes the figures to
a JSON file. `--index NAME` measures the model recorded in that index's manifest (checked
against its fingerprint); `eval ir --search-index` also ranks with the index itself
instead of an exact search.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from semsearch import __version__
from semsearch.cli.common import (
    DEFAULT_INDEX_DIR,
    Device,
    IndexDir,
    JsonFlag,
    Quantize,
    app,
    console,
    user_errors,
)
from semsearch.cli.train_command import Columns, parse_assignments
from semsearch.errors import SemsearchError
from semsearch.evaluation import (
    InformationRetrievalEvaluator,
    LabelledPairs,
    PairClassificationEvaluator,
    STSEvaluator,
    ir_metrics,
    read_beir,
    similarity_heatmap,
)
from semsearch.evaluation.ir import DEPTH
from semsearch.evaluation.similarity import SIMILARITIES
from semsearch.index.store import find_index
from semsearch.inputs import read_lines
from semsearch.models import BiEncoder
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.rerank import DEFAULT_TOP, Reranker, exact_rankings
from semsearch.search import Searcher
from semsearch.training.config import DataOptions
from semsearch.training.data import TrainingData, read_eval_data
from semsearch.training.dev import choose_task

eval_app = typer.Typer(help="Measure a model (or an index's model) on labelled data.",
                       no_args_is_help=True)  # fmt: skip
app.add_typer(eval_app, name="eval")

Model = Annotated[
    str | None, typer.Option(help="A model folder, hub name or 'default' (the default).")
]
Index = Annotated[
    str | None, typer.Option(help="Measure the model of this index (name or folder) instead.")
]
Out = Annotated[Path | None, typer.Option(help="Also write the figures to this JSON file.")]
BatchSize = Annotated[int, typer.Option(help="Texts per forward pass.")]
ScoreMax = Annotated[float | None, typer.Option(help="Divide the score column by this.")]


@eval_app.command("sts")
@user_errors
def sts(
    data: Annotated[str, typer.Argument(help="stsb:PATH, sick:PATH, or a file with sentence1, sentence2, score.")],
    column: Columns = None, score_max: ScoreMax = None, model: Model = None, index: Index = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR, device: Device = "auto", batch_size: BatchSize = 64,
    quantize: Quantize = None, out: Out = None, json_output: JsonFlag = False,
) -> None:  # fmt: skip
    """Spearman and Pearson correlation of four similarities with graded pairs."""
    pairs = _read(data, column, score_max, "sts")
    encoder, described, _ = load_encoder(model, index, index_dir, device, quantize)
    evaluator = STSEvaluator.from_columns(pairs.columns, name=data)
    evaluator.batch_size = batch_size
    facts = {"data": data, "rows": len(pairs)}
    _run("sts", evaluator, encoder, described, facts, Output(out, json_output))


@eval_app.command("pairs")
@user_errors
def pairs(
    dev: Annotated[str, typer.Argument(help="Pairs with sentence1, sentence2 and a 0/1 label; thresholds are chosen here.")],
    test: Annotated[str | None, typer.Option(help="Pairs to apply the dev thresholds to (default: dev itself).")] = None,
    column: Columns = None, model: Model = None, index: Index = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR, device: Device = "auto", batch_size: BatchSize = 64,
    out: Out = None, json_output: JsonFlag = False,
) -> None:  # fmt: skip
    """Duplicate / not: accuracy, F1, precision, recall at dev thresholds; average precision."""
    dev_pairs = _labelled(_read(dev, column, None, "pairs"))
    test_pairs = _labelled(_read(test, column, None, "pairs")) if test else None
    encoder, described, _ = load_encoder(model, index, index_dir, device)
    evaluator = PairClassificationEvaluator(
        dev_pairs, test_pairs, name=test or dev, batch_size=batch_size
    )
    facts = {"dev": dev, "test": test, "dev_rows": len(dev_pairs.labels)}
    _run("pairs", evaluator, encoder, described, facts, Output(out, json_output))


@eval_app.command("ir")
@user_errors
def ir(
    folder: Annotated[Path, typer.Argument(help="A BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv (or .gz).")],
    split: Annotated[str, typer.Option(help="Which qrels file to read.")] = "test",
    search_index: Annotated[bool, typer.Option(help="Rank with the --index itself (built from corpus.jsonl with --id-column _id).")] = False,
    rerank: Annotated[str | None, typer.Option(help="A cross-encoder folder that re-orders each query's first --rerank-top documents.")] = None,
    rerank_top: Annotated[int, typer.Option(help="Documents per query for --rerank to re-order.")] = DEFAULT_TOP,
    model: Model = None, index: Index = None, index_dir: IndexDir = DEFAULT_INDEX_DIR,
    device: Device = "auto", batch_size: BatchSize = 64, quantize: Quantize = None,
    out: Out = None, json_output: JsonFlag = False,
) -> None:  # fmt: skip
    """nDCG@10, MRR@10, recall@1/10/100 and MAP@100 on a BEIR-format folder."""
    data = read_beir(folder, split)
    encoder, described, searcher = load_encoder(model, index, index_dir, device, quantize)
    facts = {"data": str(folder), "split": split, "documents": len(data.corpus)}
    if rerank is not None:
        if search_index and searcher is None:
            raise SemsearchError("--search-index needs --index NAME: the index to rank with")
        reranker = Reranker(CrossEncoder.load(rerank, device=device), top=rerank_top)
        started = time.monotonic()
        rankings = (index_rankings(searcher, data.queries, data.qrels) if search_index and searcher
                    else exact_rankings(encoder, data, max(DEPTH, rerank_top), batch_size))  # fmt: skip
        before = ir_metrics(rankings, data.qrels)
        metrics = ir_metrics(
            reranker.rerank_rankings(rankings, data.queries, data.corpus), data.qrels
        )
        if not json_output:
            console.print(f"before re-ranking: ndcg@10 {before['ndcg@10']:.4f}")
        facts.update(ranking="the index" if search_index else "exact search", rerank=rerank,
                     rerank_top=rerank_top, before_rerank=before)  # fmt: skip
        _report("ir", metrics, f"{described} re-ranked by {rerank}", facts,
                time.monotonic() - started, Output(out, json_output))  # fmt: skip
        return
    if not search_index:
        evaluator = InformationRetrievalEvaluator(data, name=folder.name, batch_size=batch_size)
        _run("ir", evaluator, encoder, described, {**facts, "ranking": "exact search"},
             Output(out, json_output))  # fmt: skip
        return
    if searcher is None:
        raise SemsearchError("--search-index needs --index NAME: the index to rank with")
    started = time.monotonic()
    metrics = ir_metrics(index_rankings(searcher, data.queries, data.qrels), data.qrels)
    ranking = f"the index ({searcher.manifest.index.factory})"
    _report("ir", metrics, described, {**facts, "ranking": ranking}, time.monotonic() - started,
            Output(out, json_output))  # fmt: skip


@eval_app.command("heatmap")
@user_errors
def heatmap(
    sentences: Annotated[Path, typer.Argument(help="A text file, one sentence per line (2 or more).")],
    png: Annotated[Path, typer.Option(help="Where to write the PNG.")] = Path("heatmap.png"),
    title: Annotated[str, typer.Option(help="A title for the figure.")] = "",
    model: Model = None, index: Index = None, index_dir: IndexDir = DEFAULT_INDEX_DIR,
    device: Device = "auto", out: Out = None,
) -> None:  # fmt: skip
    """A PNG of the cosine similarity of every pair of sentences, and the matrix as a table."""
    texts = read_lines(sentences)
    if len(texts) < 2:
        raise SemsearchError(
            f"{sentences} holds {len(texts)} sentence: a heat-map needs two or more"
        )
    encoder, described, _ = load_encoder(model, index, index_dir, device)
    matrix = similarity_heatmap(encoder, texts, png, title)
    console.print(f"[bold]heatmap[/bold]: cosine similarity, {described}")
    table = Table()
    table.add_column("#", justify="right")
    table.add_column("sentence", overflow="fold", max_width=50)
    for number in range(len(texts)):
        table.add_column(str(number), justify="right")
    for number, (text, row) in enumerate(zip(texts, matrix)):
        table.add_row(str(number), text, *[f"{value:.2f}" for value in row])
    console.print(table)
    console.print(f"heat-map written to {png}")
    _write_json(Output(out), {"task": "heatmap", "model": described, "png": str(png),
                              "sentences": texts, "matrix": matrix.round(6).tolist()})  # fmt: skip


def load_encoder(
    model: str | None,
    index: str | None,
    index_dir: Path,
    device: str,
    quantization: str | None = None,
) -> tuple[BiEncoder, str, Searcher | None]:
    """The encoder to measure, a description of it, and the index's searcher when one was named."""
    if model is not None and index is not None:
        raise SemsearchError("give either --model or --index, not both")
    if index is None:
        described = (model or DEFAULT_MODEL) + (f" ({quantization})" if quantization else "")
        encoder = BiEncoder.load(model or DEFAULT_MODEL, device=device, quantization=quantization)
        return encoder, described, None
    if quantization is not None:
        raise SemsearchError(
            "--quantize goes with --model: an index uses the encoder it was built with"
        )
    searcher = Searcher(find_index(index, index_dir), device=device)
    described = f"index {searcher.folder.name} (model {searcher.manifest.model.name})"
    return searcher.encoder, described, searcher


def index_rankings(
    searcher: Searcher, queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> dict[str, list[str]]:
    """Document ids the index returns for each judged query, best first."""
    if searcher.manifest.source.id_column is None:
        raise SemsearchError(f"index {searcher.folder.name!r} has no id column: build it from "
                             "corpus.jsonl with --id-column _id to rank BEIR queries with it")  # fmt: skip
    judged = [query for query in qrels if query in queries]
    results = searcher.search([queries[query] for query in judged], k=DEPTH)
    return {query: [str(hit.id) for hit in hits] for query, hits in zip(judged, results)}


def _read(
    source: str, column: list[str] | None, score_max: float | None, task: str
) -> TrainingData:
    options = DataOptions(
        train=source, columns=parse_assignments(column, "--column"), score_max=score_max
    )
    data = read_eval_data(source, options)
    choose_task(data, task)  # names the missing columns, if any
    return data


def _labelled(data: TrainingData) -> LabelledPairs:
    try:
        labels = [int(float(value)) for value in data.columns["label"]]
    except (TypeError, ValueError):
        raise SemsearchError(f"{data.source}: column 'label' must hold 0 or 1") from None
    if not set(labels) <= {0, 1}:
        raise SemsearchError(
            f"{data.source}: column 'label' must hold 0 or 1, not {sorted(set(labels))[:5]}"
        )
    return LabelledPairs(data.columns["sentence1"], data.columns["sentence2"], labels)


@dataclass(frozen=True)
class Output:
    """Where a command's figures go: a table (or one JSON line with `json`), and a file."""

    path: Path | None
    json: bool = False


def _run(
    task: str, evaluator: Any, encoder: BiEncoder, described: str, facts: dict, output: Output
) -> None:
    started = time.monotonic()
    metrics = evaluator(encoder)
    _report(task, metrics, described, facts, time.monotonic() - started, output)


def _report(task: str, metrics: dict[str, float], described: str, facts: dict, seconds: float,
            output: Output) -> None:  # fmt: skip
    payload = {"task": task, "model": described, **facts, "metrics": metrics,
               "seconds": round(seconds, 2), "semsearch_version": __version__}  # fmt: skip
    if output.json:
        typer.echo(json.dumps(payload, default=float))
    else:
        data = facts.get("data") or facts.get("test") or facts.get("dev")
        console.print(f"[bold]{task}[/bold]: {described} on {data} ({seconds:.1f} s)")
        console.print(metrics_table(metrics))
    _write_json(output, payload)


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


def _write_json(output: Output, payload: dict) -> None:
    if output.path is None:
        return
    output.path.parent.mkdir(parents=True, exist_ok=True)
    output.path.write_text(json.dumps(payload, indent=2, default=float) + "\n", encoding="utf-8")
    if not output.json:
        console.print(f"figures written to {output.path}")
