"""`semsearch add`, `delete`, `reindex`, `compact` and `rollback`: changing an index in place.

Each writes a new generation; a searcher opened on an older one keeps answering from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from semsearch.ann.factory import parse_bytes
from semsearch.cli.common import DEFAULT_INDEX_DIR, app, console, show_progress, user_errors
from semsearch.cli.engine_options import (
    Address,
    Engine,
    Workers,
    corpus_location,
    index_folder,
    ray_options,
)
from semsearch.cli.options import (
    Device,
    EncodeBatch,
    FaissDeviceOption,
    IndexArgument,
    IndexDir,
    IndexOption,
    JsonFlag,
    RuntimeOption,
    required_index,
)
from semsearch.cli.output import document_count, print_json_lines
from semsearch.io.inputs import read_lines
from semsearch.store.folders import find_index

if TYPE_CHECKING:
    from semsearch.ingest.update import ChangeResult

IndexName = Annotated[str, typer.Option("--index", help="Name or folder of the index to change.")]
AddedRows = Annotated[
    str, typer.Argument(help="Corpus file with the rows to add or update (a path or a URI).")
]
AddTextColumn = Annotated[
    str | None, typer.Option(help="Column holding the text (default: the index's).")
]
AddIdColumn = Annotated[
    str | None, typer.Option(help="Must be the index's own id column, if given.")
]
ConvertTypes = Annotated[
    bool,
    typer.Option(
        "--convert-types",
        help="Read a column whose type differs from the index's as the index's type where "
        "every value converts without loss (e.g. the id '01' as 1); refused otherwise.",
    ),
]


@app.command()
@user_errors
def add(
    corpus: AddedRows,
    index: IndexName,
    text_column: AddTextColumn = None,
    id_column: AddIdColumn = None,
    convert_types: ConvertTypes = False,
    batch_size: EncodeBatch = None,
    device: Device = "auto",
    runtime: RuntimeOption = "auto",
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: JsonFlag = False,
    engine: Engine = "local",
    address: Address = None,
    workers: Workers = None,
) -> None:
    """Upsert CORPUS's rows into an index: new ids are added, changed rows re-encoded,
    unchanged rows skipped without encoding. Ids and columns keep the index's types: a
    value that would change meaning (the id '01' in an index of integer ids) is refused."""
    from semsearch.ingest.build_options import check_batch_size
    from semsearch.ingest.update import add_rows

    check_batch_size(batch_size)  # as build checks it: before Ray, the index or the model
    on_ray = ray_options(engine, address, workers, show_progress(json_output))
    index_folder(index, "--index")  # a name or a folder, never a URI
    folder = find_index(index, index_folder(index_dir))
    rows = corpus_location(corpus)
    if on_ray is not None:
        from semsearch.distributed.update import add_rows_on_ray

        encoder = _encoder_for(folder, device, runtime)
        result = add_rows_on_ray(
            folder,
            rows,
            encoder,
            text_column,
            id_column,
            batch_size,
            on_ray,
            device,
            convert_types,
            runtime,
        )
    else:  # the model loads only once some row needs encoding
        result = add_rows(
            folder,
            rows,
            None,
            text_column,
            id_column,
            batch_size,
            device=device,
            convert_types=convert_types,
            show_progress=show_progress(json_output),
            runtime=runtime,
        )
    _report(folder.name, result, json_output)


@app.command()
@user_errors
def delete(
    name: IndexArgument = None,
    index: IndexOption = None,
    ids: Annotated[Path | None, typer.Option(help="File with one id per line to delete.")] = None,
    where: Annotated[
        str | None, typer.Option(help="Delete the rows satisfying this SQL condition.")
    ] = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: JsonFlag = False,
) -> None:
    """Delete rows by id (--ids FILE) or by a condition (--where "year < 2010")."""
    from semsearch.ingest.update import delete_rows

    folder = find_index(required_index(name, index, "delete"), index_dir)
    result = delete_rows(folder, read_lines(ids) if ids else None, where)
    _report(folder.name, result, json_output)


@app.command()
@user_errors
def reindex(
    name: IndexArgument = None,
    index: IndexOption = None,
    index_type: Annotated[
        str | None,
        typer.Option(
            help="flat, ivf, ivfsq (IVF over fp16 codes), hnsw, ivfpq, disk (larger than memory), auto or a FAISS factory string."
        ),
    ] = None,
    lexical: Annotated[
        bool | None,
        typer.Option(
            "--lexical/--no-lexical",
            help="Build the BM25 part from the "
            "stored texts (for query --mode lexical|hybrid), or drop it.",
        ),
    ] = None,
    target_recall: Annotated[
        float, typer.Option(help="Tune nprobe/efSearch to this recall@10 (0: skip).")
    ] = 0.95,
    memory_budget: Annotated[
        str | None, typer.Option(help="Memory the index may take (e.g. 2G).")
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(help="Fail (and write nothing) when tuning misses --target-recall."),
    ] = False,
    device: FaissDeviceOption = "auto",
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: JsonFlag = False,
) -> None:
    """Rebuild the FAISS structure from the stored vectors, or add (--lexical) or drop
    (--no-lexical) the BM25 part built from the stored texts, without loading the model."""
    from semsearch.errors import SemsearchError
    from semsearch.ingest.maintain import reindex as rebuild
    from semsearch.ingest.maintain import set_lexical
    from semsearch.store.manifest import LexicalSpec

    if index_type is None and lexical is None:
        raise SemsearchError("say what to rebuild: --index-type TYPE, --lexical or --no-lexical")
    folder = find_index(required_index(name, index, "reindex"), index_dir)
    budget = parse_bytes(memory_budget) if memory_budget else None
    if index_type is not None:
        manifest = rebuild(
            folder,
            index_type,
            target_recall or None,
            budget,
            show_progress=show_progress(),
            device=device,
            strict=strict,
        )
    if lexical is not None:
        manifest = set_lexical(folder, LexicalSpec() if lexical else None)
    _report_manifest(folder.name, manifest, json_output)


@app.command()
@user_errors
def compact(
    name: IndexArgument = None,
    index: IndexOption = None,
    keep: Annotated[int, typer.Option(help="Generations to keep, the current one included.")] = 1,
    device: FaissDeviceOption = "auto",
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: JsonFlag = False,
) -> None:
    """Merge segments, drop deleted rows, and forget generations older than the last --keep."""
    from semsearch.ingest.maintain import compact as merge

    folder = find_index(required_index(name, index, "compact"), index_dir)
    manifest = merge(folder, keep, show_progress=show_progress(), device=device)
    _report_manifest(folder.name, manifest, json_output)


@app.command()
@user_errors
def rollback(
    name: IndexArgument = None,
    generation: Annotated[
        int | None,
        typer.Argument(help="The generation to make current again.", show_default=False),
    ] = None,
    index: IndexOption = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: JsonFlag = False,
) -> None:
    """Make an older generation current again (recorded as a new generation)."""
    from semsearch.ingest.maintain import rollback as restore

    name, generation = _rollback_target(name, generation, index)
    folder = find_index(name, index_dir)
    _report_manifest(folder.name, restore(folder, generation), json_output)


def _rollback_target(
    argument: str | None, generation: int | None, option: str | None
) -> tuple[str, int]:
    """`rollback NAME GENERATION`, or `rollback --index NAME GENERATION`, whose one argument
    is then the generation."""
    from semsearch.errors import SemsearchError

    if generation is None and option is not None and argument is not None:
        if not argument.lstrip("-").isdigit():
            raise SemsearchError(f"GENERATION is a whole number, not {argument!r}")
        argument, generation = None, int(argument)
    name = required_index(argument, option, "rollback")
    if generation is None:
        raise SemsearchError("say which generation: semsearch rollback NAME GENERATION")
    return name, generation


def _encoder_for(folder, device: str, runtime: str = "auto"):
    """The index's model; none for an index of your own vectors (an add reads its vectors)."""
    if folder.manifest().own_vectors:
        return None
    from semsearch.models.bi_encoder import BiEncoder

    return BiEncoder.for_index(folder.manifest().model, device, runtime)  # type: ignore[arg-type]


def _report(name: str, result: ChangeResult, json_output: bool) -> None:
    if json_output:
        print_json_lines([{"index": name, **result.to_dict()}])
        return
    counts = _counted(result.to_dict())
    chunks = _counted(result.chunks or {})
    counts += f"; chunks: {chunks}" if chunks else ""
    where = f"generation {result.generation}" if result.generation else "no new generation"
    console.print(f"{name}: {counts or 'nothing to do'} ({where})")


def _counted(counts: dict) -> str:
    """'added 2, replaced 1': the counts that are not 0 (the generation, chunks and phases apart)."""
    return ", ".join(
        f"{key.replace('_', ' ')} {value:,}"
        for key, value in counts.items()
        if key not in ("generation", "chunks", "phases") and value
    )


def _report_manifest(name: str, manifest, json_output: bool) -> None:
    if json_output:
        print_json_lines([{"index": name, **manifest.view()}])
        return
    lexical = "BM25" if manifest.lexical is not None else "no lexical part"
    console.print(
        f"{name}: generation {manifest.generation}, {document_count(manifest.counts())} in "
        f"{len(manifest.segments)} segment(s), {manifest.index.factory} {manifest.index.search_params}, "
        f"{lexical}"
    )
