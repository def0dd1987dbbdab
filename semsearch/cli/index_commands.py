"""`semsearch build`, `info` and `list`: making index folders and looking at them."""

from __future__ import annotations

from dataclasses import dataclass
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
    DocumentPrompt,
    EncodeBatch,
    IdColumn,
    IndexDir,
    IndexOption,
    IndexOrMostRecent,
    Quantize,
    QueryPrompt,
    RuntimeOption,
    chosen_index,
)
from semsearch.cli.output import document_count, print_json_lines, print_mapping
from semsearch.disk import human_bytes
from semsearch.io.inputs import read_lines
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.options import (
    CHUNKING_MODES,
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_TARGET_RECALL,
    check_choice,
)
from semsearch.store.folders import IndexFolder, find_index, scan_indexes

if TYPE_CHECKING:
    from semsearch.ingest.build_options import BuildOptions
    from semsearch.store.manifest import Manifest


Corpus = Annotated[
    str,
    typer.Argument(
        help="Corpus file: .parquet, .csv, .tsv or .jsonl (optionally .gz); "
        "or a folder of them, or a quoted glob ('data/*.parquet'); local or a "
        "URI (s3://bucket/prefix/*.parquet, gs://, hdfs://, file://). Or a folder (or "
        "glob) of documents: .txt, .md, .html/.htm (.pdf with the pdf extra), one "
        "document per file, its id the path relative to the folder."
    ),
]
IndexName = Annotated[
    str | None, typer.Option(help="Index name (default: the corpus file's or folder's name).")
]
TextColumn = Annotated[
    str,
    typer.Option(
        help="Column holding the text to embed (with --vector-column: the rows' texts, "
        "optional; 'text' is used when there is one)."
    ),
]
BuildModel = Annotated[
    str | None,
    typer.Option(
        help="'default' (embedded all-MiniLM-L6-v2), a model folder or a hub name. With "
        "--vector-column: the model that made the vectors, so text queries work "
        "(default: none; query by vector)."
    ),
]
VectorColumn = Annotated[
    str | None,
    typer.Option(
        help="Your own vectors: a column of float lists (or fixed-size lists), indexed "
        "as they are, no model loaded to encode them; with --metric cosine they are "
        "normalised to unit length."
    ),
]
IndexType = Annotated[
    str,
    typer.Option(
        help="auto (exact up to 100k rows, then ivfsq), flat, ivf, ivfsq (IVF over fp16 codes), hnsw, ivfpq, disk (IVF-PQ codes read from the file, answers re-scored from the stored vectors: larger than memory), or a FAISS factory string."
    ),
]
Metric = Annotated[str, typer.Option(help="cosine, dot, l2 or manhattan.")]
Overwrite = Annotated[bool, typer.Option(help="Replace an existing index of the same name.")]
Strict = Annotated[
    bool,
    typer.Option(
        help="Fail on null or empty texts instead of skipping them, and when "
        "tuning misses --target-recall instead of keeping the best found."
    ),
]
MemoryBudget = Annotated[
    str | None,
    typer.Option(help="Memory the index may take (e.g. 2G); auto picks a type that fits."),
]
TargetRecall = Annotated[
    float,
    typer.Option(
        help="IVF/HNSW only: tune nprobe/efSearch to this recall@10 against exact search "
        "(0: skip tuning, keep the fixed default)."
    ),
]
TuningQueries = Annotated[
    Path | None,
    typer.Option(help="Queries (one per line) for --target-recall; default: corpus samples."),
]
StoreVectors = Annotated[
    str, typer.Option(help="fp32, or fp16 to halve the vectors kept on disk for reindexing.")
]
Lexical = Annotated[
    bool,
    typer.Option(
        help="Build the BM25 index beside the vectors (for query --mode "
        "lexical|hybrid); --no-lexical skips it."
    ),
]
Chunking = Annotated[
    str,
    typer.Option(
        help="auto: cut texts longer than the model's window into overlapping chunks "
        "(one vector each; a query returns each document once, by its best chunk, "
        "with the passage), only when some text is that long; on: always; off: embed "
        "each text from its first window only."
    ),
]
ChunkTokens = Annotated[
    int | None,
    typer.Option(
        help=f"A chunk's length in the model's tokens (default {DEFAULT_CHUNK_TOKENS}; "
        "larger for broad, topical queries)."
    ),
]
ChunkOverlap = Annotated[int, typer.Option(help="Tokens shared by consecutive chunks.")]
ManifestJson = Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")]


@app.command()
@user_errors
def build(
    corpus: Corpus,
    name: IndexName = None,
    text_column: TextColumn = "text",
    id_column: IdColumn = None,
    model: BuildModel = None,
    vector_column: VectorColumn = None,
    index_type: IndexType = "auto",
    metric: Metric = "cosine",
    batch_size: EncodeBatch = None,
    device: Device = "auto",
    quantize: Quantize = None,
    runtime: RuntimeOption = "auto",
    query_prompt: QueryPrompt = None,
    document_prompt: DocumentPrompt = None,
    out_dir: IndexDir = DEFAULT_INDEX_DIR,
    overwrite: Overwrite = False,
    strict: Strict = False,
    memory_budget: MemoryBudget = None,
    target_recall: TargetRecall = DEFAULT_TARGET_RECALL,
    tuning_queries: TuningQueries = None,
    store_vectors: StoreVectors = "fp32",
    lexical: Lexical = True,
    chunking: Chunking = "auto",
    chunk_tokens: ChunkTokens = None,
    chunk_overlap: ChunkOverlap = DEFAULT_CHUNK_OVERLAP,
    json_output: ManifestJson = False,
    engine: Engine = "local",
    address: Address = None,
    workers: Workers = None,
) -> None:
    """Embed a corpus and store a FAISS index beside its metadata in OUT_DIR/NAME/.

    An interrupted build resumes when run again, from the last 2,048 texts saved. The query
    and document prompts used are recorded, and every later query and add uses them.
    """
    options = BuildRequest(**locals()).build_options()  # first: locals() are the options alone
    on_ray = ray_options(engine, address, workers, options.show_progress)
    if on_ray is not None:
        from semsearch.distributed.build import build_index_on_ray

        folder = build_index_on_ray(options, on_ray)
    else:
        from semsearch.ingest.build import build_index

        folder = build_index(options)
    manifest = folder.manifest()
    if json_output:
        print_json_lines([{"path": str(folder.path), **manifest.view()}])
    else:
        _print_built(folder, manifest)


@dataclass(frozen=True)
class BuildRequest:
    """`semsearch build`'s options as parsed, checked and turned into `BuildOptions`."""

    corpus: str
    name: str | None
    text_column: str
    id_column: str | None
    model: str | None
    vector_column: str | None
    index_type: str
    metric: str
    batch_size: int | None
    device: str
    quantize: str | None
    runtime: str
    query_prompt: str | None
    document_prompt: str | None
    out_dir: Path
    overwrite: bool
    strict: bool
    memory_budget: str | None
    target_recall: float
    tuning_queries: Path | None
    store_vectors: str
    lexical: bool
    chunking: str
    chunk_tokens: int | None
    chunk_overlap: int
    json_output: bool
    engine: str
    address: str | None
    workers: int | None

    def build_options(self) -> BuildOptions:
        """The build these options ask for (the corpus and folder checked, the files read)."""
        from semsearch.ingest.build_options import BuildOptions
        from semsearch.store.manifest import LexicalSpec

        check_choice("--chunking mode", self.chunking, CHUNKING_MODES)
        return BuildOptions(
            corpus=corpus_location(self.corpus),
            name=self.name,
            text_column=self.text_column,
            id_column=self.id_column,
            model=self.model if self.model or self.vector_column else DEFAULT_MODEL,
            index=self.index_type,
            metric=self.metric,
            batch_size=self.batch_size,
            device=self.device,
            quantization=self.quantize,
            runtime=self.runtime,
            query_prompt=self.query_prompt,
            document_prompt=self.document_prompt,
            out_dir=index_folder(self.out_dir, "--out-dir"),
            overwrite=self.overwrite,
            strict=self.strict,
            show_progress=show_progress(self.json_output),
            memory_budget=parse_bytes(self.memory_budget) if self.memory_budget else None,
            target_recall=self.target_recall or None,
            tuning_queries=read_lines(self.tuning_queries) if self.tuning_queries else None,
            store_vectors=self.store_vectors,
            lexical=LexicalSpec() if self.lexical else None,
            vector_column=self.vector_column,
            chunking=self.chunking,
            chunk_tokens=self.chunk_tokens,
            chunk_overlap=self.chunk_overlap,
        )


def _print_built(folder: IndexFolder, manifest: Manifest) -> None:
    """The one line a build ends with: what was built, where, how large, how fast."""
    runtime = manifest.operation.get("runtime")
    if manifest.own_vectors:
        how = f" (vectors read from column {manifest.source.vector_column!r}, none encoded)"
    else:
        how = f" (encoder on {runtime})" if runtime else ""
    console.print(
        f"built {manifest.name}: {document_count(manifest.counts())}, {manifest.index.factory} "
        f"({manifest.index.metric}), {human_bytes(folder.size_bytes())} in {folder.path} "
        f"in {manifest.build_seconds:.1f} s{how}",
        markup=False,  # a name or path may hold [brackets]
    )


@app.command()
@user_errors
def info(
    name: IndexOrMostRecent = None,
    index: IndexOption = None,
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show an index's manifest, its generations and its size on disk."""
    from semsearch.index import Index  # the library: not for --help

    folder = find_index(chosen_index(name, index), index_dir)
    manifest = folder.manifest().view()
    generations = Index(folder).history()
    size = folder.size_bytes()
    if json_output:
        print_json_lines(
            [{"path": str(folder.path), **manifest, "bytes": size, "generations": generations}]
        )
        return
    segments = manifest.pop("segments")
    files = manifest.pop("files")
    if manifest["rows"] is None:  # a chunked index written before documents were recorded
        manifest["rows"] = "documents not recorded (the next add, delete or compact counts them)"
    for key in ("query_prompt", "document_prompt"):  # repr: a prompt's spaces matter
        manifest["model"][key] = repr(manifest["model"][key]) if manifest["model"][key] else "none"
    manifest["checksums"] = (
        f"{len(files)} files" if files is not None else "none ('semsearch verify --record')"
    )
    print_mapping(f"index {folder.name} ({folder.path}), {human_bytes(size)}", manifest, console)
    stored = "chunks" if "chunks" in manifest else "rows"  # a segment's rows: chunks there
    for segment in segments:
        console.print(
            f"  segment {segment['name']}: {segment['rows']} {stored}, {segment['deleted']} deleted"
        )
    console.print("generations (* current):")
    for line in generations:
        mark = "*" if line["generation"] == manifest["generation"] else " "
        console.print(
            f" {mark} {line['generation']:>4}  {line['created_at']}  {document_count(line):>9}  "
            f"{line['operation']}"
        )


@app.command("list")
@user_errors
def list_command(
    index_dir: IndexDir = DEFAULT_INDEX_DIR,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """List the indexes in INDEX_DIR, most recently built first; broken ones and interrupted
    builds after them, each with what to do."""
    rows = []
    for entry in scan_indexes(index_dir):
        row = {"name": entry.name, "status": entry.status, "path": str(entry.path)}
        if entry.manifest is not None:
            manifest = entry.manifest
            row.update(
                {
                    **manifest.counts(),
                    "index": manifest.index.factory,
                    "model": manifest.model.name,
                    "created_at": entry.created_at,
                    "generation": manifest.generation,
                    "bytes": IndexFolder(entry.path).size_bytes(),
                }
            )
        else:
            row["reason"] = entry.reason
        rows.append(row)
    if json_output:
        print_json_lines(rows)
    elif not rows:
        console.print(f"no indexes in {index_dir}/")
    else:
        for row in rows:
            line = (
                f"{row['name']:<24} {document_count(row):>28}  {row['index']:<16} "
                f"{human_bytes(row['bytes']):>10}  {row['created_at'][:19]}  {row['model']}"
                if row["status"] == "ok"
                else f"{row['name']:<24} {row['status']}: {row['reason']}"
            )
            console.print(line, markup=False, highlight=False, soft_wrap=True)
