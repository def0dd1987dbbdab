"""`semsearch mine`: the most similar pairs inside one collection, as a table, JSON or Parquet."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from semsearch.cli.common import DEFAULT_INDEX_DIR, app, console, show_progress, user_errors
from semsearch.cli.engine_options import (
    Address,
    Engine,
    Workers,
    corpus_location,
    index_folder,
    ray_options,
)
from semsearch.cli.options import Device, EncodeBatch, IdColumn, IndexDir, JsonFlag, QueryPrompt
from semsearch.cli.output import print_json_lines
from semsearch.errors import SemsearchError
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.phases import phase, timing

if TYPE_CHECKING:
    from semsearch.distributed.cluster import RayOptions
    from semsearch.mining import CorpusSource, MiningOptions, MiningResult

CELL_CHARS = 70
LARGEST_GROUPS = 10


Collection = Annotated[
    str | None,
    typer.Argument(
        help="Corpus file: .parquet, .csv, .tsv or .jsonl (optionally .gz); a "
        "path or a URI (s3://bucket/docs.parquet, gs://, hdfs://, file://)."
    ),
]
MinedIndex = Annotated[
    str | None,
    typer.Option(help="Mine this index (name or folder) instead, reusing its vectors."),
]
TextColumn = Annotated[str | None, typer.Option(help="Column holding the texts (default: text).")]
MiningModel = Annotated[
    str | None, typer.Option(help="Bi-encoder for a corpus file (default: 'default').")
]
TopK = Annotated[int, typer.Option("-k", "--top-k", help="Nearest neighbours looked at per text.")]
Threshold = Annotated[
    float | None, typer.Option(help="Keep pairs scoring at least this (cosine: -1 to 1).")
]
Top = Annotated[int | None, typer.Option(help="Keep only the best N pairs.")]
ExactDuplicates = Annotated[
    str,
    typer.Option(
        help="Identical texts: keep (pair them like others), separate (report them as "
        "groups), drop."
    ),
]
Passages = Annotated[
    bool,
    typer.Option(
        "--passages",
        help="On a chunked index, pair passages instead of documents: each pair of "
        "documents once, by its two most similar passages, boilerplate included.",
    ),
]
Out = Annotated[Path | None, typer.Option(help="Write the pairs to this Parquet file.")]
DuplicatesOut = Annotated[
    Path | None,
    typer.Option(help="Where separate writes the groups (default: OUT's name + .duplicates)."),
]
Nprobe = Annotated[
    int | None, typer.Option(help="IVF lists to visit, for collections searched with IVF.")
]
Show = Annotated[int, typer.Option(help="Pairs to show in the table.")]
WorkDir = Annotated[
    Path | None,
    typer.Option(
        help="--engine ray with a corpus file: where its vectors are written (a temporary "
        "index, removed after); on a cluster, a folder every node mounts at the same path "
        "(default: this machine's temporary folder)."
    ),
]


@app.command()
@user_errors
def mine(
    collection: Collection = None,
    index: MinedIndex = None,
    text_column: TextColumn = None,
    id_column: IdColumn = None,
    model: MiningModel = None,
    top_k: TopK = 10,
    threshold: Threshold = None,
    top: Top = None,
    exact_duplicates: ExactDuplicates = "keep",
    passages: Passages = False,
    out: Out = None,
    duplicates_out: DuplicatesOut = None,
    nprobe: Nprobe = None,
    show: Show = 20,
    batch_size: EncodeBatch = None,
    device: Device = "auto",
    query_prompt: QueryPrompt = None,
    json_output: JsonFlag = False,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    engine: Engine = "local",
    address: Address = None,
    workers: Workers = None,
    work_dir: WorkDir = None,
) -> None:
    """Find the most similar pairs of texts in COLLECTION (or in --index NAME).

    Each text's --top-k nearest neighbours are searched; every pair is kept once, best first.
    Mining is symmetric: every text of a corpus file gets the model's query prompt (the
    e5/bge convention); --index mines the vectors as the index stored them. On a chunked
    index, documents are paired (their passage vectors pooled, a passage that many documents
    share weighing little) and each pair shows the two passages that matched best.
    """
    request = MineRequest(**locals())  # first: locals() are the options alone
    options = request.mining_options()
    on_ray = ray_options(engine, address, workers, options.show_progress)
    duplicates_out = _duplicates_path(out, duplicates_out, exact_duplicates)
    for path in (out, duplicates_out):
        _check_writable(path)
    request.check_source(on_ray)
    with timing() as timer:  # the mining's phases, then the writing's
        if index is not None:
            index_folder(index, "--index")  # a name or a folder, never a URI
            result = _mine_index(index, index_folder(index_dir), options, on_ray)
        else:
            result = _mine_corpus(request.corpus_source(), options, on_ray, work_dir)
        with phase("write"):
            if out is not None:
                result.write(out)
            if duplicates_out is not None and result.duplicates is not None:
                result.duplicates.write(duplicates_out)
        result.stats.phases = timer.report().to_dict()
    logging.getLogger(__name__).info("mine: %s", timer.report().line())
    if json_output:
        _print_json(result)
    else:
        _print_tables(result, show)
    for path in (out, duplicates_out):
        if path is not None:
            typer.echo(f"wrote {path}", err=json_output)


@dataclass(frozen=True)
class MineRequest:
    """`semsearch mine`'s options as parsed, checked and grouped for `semsearch.mining`."""

    collection: str | None
    index: str | None
    text_column: str | None
    id_column: str | None
    model: str | None
    top_k: int
    threshold: float | None
    top: int | None
    exact_duplicates: str
    passages: bool
    out: Path | None
    duplicates_out: Path | None
    nprobe: int | None
    show: int
    batch_size: int | None
    device: str
    query_prompt: str | None
    json_output: bool
    index_dir: Path
    engine: str
    address: str | None
    workers: int | None
    work_dir: Path | None

    def mining_options(self) -> MiningOptions:
        """How to mine, whatever the collection."""
        from semsearch.mining import MiningOptions

        return MiningOptions(
            top_k=self.top_k,
            threshold=self.threshold,
            top=self.top,
            exact_duplicates=self.exact_duplicates,  # type: ignore[arg-type]
            nprobe=self.nprobe,
            show_progress=show_progress(json_output=True),
            # On Ray, FAISS searches on the workers' CPUs.
            device=self.device if self.engine == "local" else "cpu",
            passages=self.passages,
        )

    def check_source(self, on_ray: RayOptions | None) -> None:
        """One collection, a corpus file or an index, and only the options that fit it."""
        if (self.collection is None) == (self.index is None):
            raise SemsearchError(
                "give either a corpus file COLLECTION or --index NAME (one of them)"
            )
        if self.work_dir is not None and (on_ray is None or self.index is not None):
            raise SemsearchError(
                "--work-dir is for mining a corpus file with --engine ray: add that, or leave it "
                "out"
            )
        if self.passages and self.index is None:
            raise SemsearchError(
                "--passages pairs the passages of a chunked index (--index NAME); a corpus "
                "file is mined text by text: leave --passages out"
            )
        fixed = (self.text_column, self.id_column, self.model)
        if self.index is not None and (any(fixed) or self.query_prompt is not None):
            raise SemsearchError(
                "--text-column, --id-column, --model and --query-prompt are fixed by the "
                "index's manifest: leave them out with --index"
            )

    def corpus_source(self) -> CorpusSource:
        """The corpus file to encode and mine, with its columns and model."""
        from semsearch.mining import CorpusSource

        return CorpusSource(
            path=_corpus_path(self.collection),  # type: ignore[arg-type]
            text_column=self.text_column or "text",
            id_column=self.id_column,
            model=self.model or DEFAULT_MODEL,
            batch_size=self.batch_size,
            device=self.device,
            query_prompt=self.query_prompt,
        )


def _mine_index(index: str, index_dir: Path, options, on_ray) -> MiningResult:
    if on_ray is None:
        from semsearch.mining import mine_index

        return mine_index(index, index_dir, options)
    from semsearch.distributed.mine import mine_index_on_ray

    return mine_index_on_ray(index, index_dir, options, on_ray)


def _mine_corpus(source, options, on_ray, work_dir: Path | None) -> MiningResult:
    if on_ray is None:
        from semsearch.mining import mine_corpus

        return mine_corpus(source, options)
    from semsearch.distributed.mine import mine_corpus_on_ray

    return mine_corpus_on_ray(source, options, on_ray, work_dir)


def _corpus_path(collection: str) -> str | Path:
    """The corpus to mine; a URI is checked when it is opened."""
    location = corpus_location(collection)
    if isinstance(location, Path) and not location.exists():
        raise SemsearchError(
            f"corpus file {collection} does not exist: check the path (to mine an index, "
            "use --index NAME)"
        )
    return location


def _duplicates_path(out: Path | None, chosen: Path | None, mode: str) -> Path | None:
    if mode != "separate":
        if chosen is not None:
            raise SemsearchError("--duplicates-out needs --exact-duplicates separate")
        return None
    if chosen is not None or out is None:
        return chosen
    return out.with_name(out.name.removesuffix(".parquet") + ".duplicates.parquet")


def _check_writable(path: Path | None) -> None:
    """Fail before mining, not after it, when a result file cannot be written."""
    if path is None:
        return
    if path.is_dir():
        raise SemsearchError(f"{path} is a folder: give a file name such as pairs.parquet")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SemsearchError(f"cannot create the folder for {path}: {exc.strerror}") from exc


def _print_json(result: MiningResult) -> None:
    """The pairs, the groups of identical texts, then where the time went (`kind` says which)."""
    print_json_lines({"kind": "pair", **record} for record in result.records())
    if result.duplicates is not None:
        print_json_lines(
            {"kind": "duplicates", **group} for group in result.duplicates.table.to_pylist()
        )
    print_json_lines([{"kind": "phases", **result.stats.phases}])


def _print_tables(result: MiningResult, show: int) -> None:
    table = Table(
        title=f"[bold]most similar pairs in {escape(result.collection.name)}[/bold]",
        title_justify="left",
    )
    for column in ("rank", "score", "id_a", "id_b", "text_a", "text_b"):
        table.add_column(column, justify="right" if column == "rank" else "left")
    for record in result.records(limit=show):
        table.add_row(
            str(record["rank"]),
            f"{record['score']:.4f}",
            str(record["id_a"]),
            str(record["id_b"]),
            _short(record["text_a"]),
            _short(record["text_b"]),
        )
    console.print(table)
    console.print(_summary(result))
    if result.duplicates is not None and len(result.duplicates):
        unit = result.stats.unit  # texts, documents or passages
        groups = Table(
            title=f"[bold]largest groups of identical {unit}[/bold]", title_justify="left"
        )
        for column in ("count", "text", "ids"):
            groups.add_column(column, justify="right" if column == "count" else "left")
        for group in result.duplicates.table.slice(0, LARGEST_GROUPS).to_pylist():
            ids = ", ".join(str(value) for value in group["ids"][:5])
            groups.add_row(str(group["count"]), _short(group["text"]), _short(ids))
        console.print(groups)
        where = "rows" if unit == "texts" else unit
        console.print(
            f"{len(result.duplicates)} {unit} occur more than once, in {result.duplicates.rows} {where}"
        )


def _summary(result: MiningResult) -> str:
    """What was paired, in the user's terms: texts, documents, or passages of documents."""
    stats = result.stats
    among = f"{stats.searched_rows:,} of {stats.rows:,} {stats.unit}"
    copies = f"{stats.exact_duplicate_rows:,} rows repeat an earlier text"
    if stats.unit == "documents":
        among += f" ({stats.passages:,} passages)"
        copies = f"{stats.exact_duplicate_rows:,} documents repeat an earlier one"
    elif stats.unit == "passages":
        among += f" of {stats.documents:,} documents"
        copies = f"{stats.exact_duplicate_rows:,} passages repeat an earlier one"
    return (
        f"{len(result):,} pairs (of {result.pairs_found:,} found) among {among}, "
        f"{stats.top_k} neighbours each, {stats.structure}; {copies}"
    )


def _short(text: str) -> str:
    """A cell's text, cut to CELL_CHARS and escaped: a "[/]" in a corpus is text, not markup."""
    return escape(text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…")
