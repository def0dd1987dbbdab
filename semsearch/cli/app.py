"""`semsearch` commands. Each parses its options, calls the library, and formats the result."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from semsearch.cli.output import human_bytes, print_hits, print_json_lines, print_mapping
from semsearch.errors import SemsearchError
from semsearch.index.build import BuildOptions, build_index
from semsearch.index.store import DEFAULT_INDEX_DIR, find_index, list_indexes
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.search import Searcher

app = typer.Typer(
    help="Semantic search with a Sentence-BERT bi-encoder: build FAISS indexes over your texts and query them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
Command = TypeVar("Command", bound=Callable)

IndexDir = Annotated[
    Path, typer.Option("--out-dir", "--index-dir", help="Folder that holds the index folders.")
]
Device = Annotated[str, typer.Option(help="auto (CUDA when present), cpu, cuda or cuda:N.")]


def user_errors(command: Command) -> Command:
    """Print a user's mistake as one line on stderr and exit 2, with no traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except SemsearchError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


@app.command()
@user_errors
def build(
    corpus: Annotated[
        Path, typer.Argument(help="Corpus file: .parquet, .csv, .tsv or .jsonl (optionally .gz).")
    ],
    name: Annotated[
        str | None, typer.Option(help="Index name (default: the corpus file's name).")
    ] = None,
    text_column: Annotated[str, typer.Option(help="Column holding the text to embed.")] = "text",
    id_column: Annotated[
        str | None, typer.Option(help="Column of unique ids (default: the row number).")
    ] = None,
    model: Annotated[
        str,
        typer.Option(help="'default' (embedded all-MiniLM-L6-v2), a model folder or a hub name."),
    ] = DEFAULT_MODEL,
    index: Annotated[
        str, typer.Option(help="auto, flat, ivf, hnsw, ivfpq, or a FAISS factory string.")
    ] = "auto",
    metric: Annotated[str, typer.Option(help="cosine, dot, l2 or manhattan.")] = "cosine",
    batch_size: Annotated[int, typer.Option(help="Texts per forward pass.")] = 64,
    device: Device = "auto",
    out_dir: IndexDir = DEFAULT_INDEX_DIR,
    overwrite: Annotated[
        bool, typer.Option(help="Replace an existing index of the same name.")
    ] = False,
    strict: Annotated[
        bool, typer.Option(help="Fail on null or empty texts instead of skipping them.")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the manifest as JSON.")
    ] = False,
) -> None:
    """Embed a corpus and store a FAISS index beside its metadata in OUT_DIR/NAME/.

    An interrupted build resumes from its last complete shard when run again.
    """
    options = BuildOptions(
        corpus=corpus, name=name, text_column=text_column, id_column=id_column, model=model,
        index=index, metric=metric, batch_size=batch_size, device=device, out_dir=out_dir,
        overwrite=overwrite, strict=strict, show_progress=sys.stderr.isatty() or not json_output,
    )  # fmt: skip
    folder = build_index(options)
    manifest = folder.manifest()
    if json_output:
        print_json_lines([{"path": str(folder.path), **manifest.to_dict()}])
        return
    console.print(
        f"built [bold]{manifest.name}[/bold]: {manifest.rows} vectors, {manifest.index.factory} "
        f"({manifest.index.metric}), {human_bytes(sum(folder.size_bytes().values()))} in {folder.path} "
        f"in {manifest.build_seconds:.1f} s"
    )


@app.command()
@user_errors
def query(
    text: Annotated[str | None, typer.Argument(help="The text to search for.")] = None,
    index: Annotated[
        str | None, typer.Option(help="Index name or folder (default: the most recent).")
    ] = None,
    k: Annotated[int, typer.Option("-k", "--top-k", help="How many results per query.")] = 10,
    file: Annotated[Path | None, typer.Option(help="Text file with one query per line.")] = None,
    nprobe: Annotated[
        int | None, typer.Option(help="IVF lists to visit (overrides the manifest).")
    ] = None,
    ef_search: Annotated[
        int | None, typer.Option(help="HNSW candidate list size (overrides the manifest).")
    ] = None,
    show: Annotated[
        list[str] | None, typer.Option(help="Metadata column to add to the table (repeatable).")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print JSON lines, one per result, with every column.")
    ] = False,
    device: Device = "auto",
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
) -> None:
    """Find the rows nearest in meaning to TEXT (or to each line of --file)."""
    queries = _read_queries(text, file)
    searcher = Searcher(find_index(index, index_dir), device=device)
    missing = [column for column in show or [] if column not in searcher.metadata.column_names]
    if missing:
        raise SemsearchError(
            f"no column {missing[0]!r} in the index's metadata; its columns are: "
            f"{', '.join(searcher.metadata.column_names)}"
        )
    results = searcher.search(queries, k=k, nprobe=nprobe, efSearch=ef_search)
    if json_output:
        print_json_lines(hit.to_dict(searcher.score_name) for hits in results for hit in hits)
        return
    for query_text, hits in zip(queries, results):
        print_hits(query_text, hits, searcher.score_name, console, show or [])


@app.command()
@user_errors
def info(
    name: Annotated[
        str | None, typer.Argument(help="Index name or folder (default: the most recent).")
    ] = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show an index's manifest and the sizes of its files."""
    folder = find_index(name, index_dir)
    manifest = folder.manifest().to_dict()
    sizes = folder.size_bytes()
    if json_output:
        print_json_lines([{"path": str(folder.path), **manifest, "file_bytes": sizes}])
        return
    print_mapping(f"index {folder.name} ({folder.path})", manifest, console)
    print_mapping("files", {name: human_bytes(size) for name, size in sizes.items()}, console)


@app.command("list")
@user_errors
def list_command(
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """List the indexes in INDEX_DIR, most recent first."""
    rows = []
    for folder in list_indexes(index_dir):
        manifest = folder.manifest()
        rows.append({"name": folder.name, "rows": manifest.rows, "index": manifest.index.factory,
                     "model": manifest.model.name, "created_at": manifest.created_at,
                     "bytes": sum(folder.size_bytes().values())})  # fmt: skip
    if json_output:
        print_json_lines(rows)
    elif not rows:
        console.print(f"no indexes in {index_dir}/")
    else:
        for row in rows:
            console.print(f"{row['name']:<24} {row['rows']:>9} rows  {row['index']:<16} "
                          f"{human_bytes(row['bytes']):>10}  {row['created_at']}  {row['model']}")  # fmt: skip


def _read_queries(text: str | None, file: Path | None) -> list[str]:
    if (text is None) == (file is None):
        raise SemsearchError("give either a query TEXT or --file QUERIES.txt (one of them)")
    if file is None:
        return [text]
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SemsearchError(f"cannot read queries from {file}: {exc}") from exc
    queries = [line.strip() for line in lines if line.strip()]
    if not queries:
        raise SemsearchError(f"{file} holds no queries: write one query per line")
    return queries


def main() -> None:
    app()
