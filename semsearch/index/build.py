"""`semsearch build`: corpus -> (filter -> encode -> shards) -> FAISS index + metadata + manifest.

The build streams the corpus in record batches, encodes it in shards written to disk, then
trains the index on a sample of the vectors and fills it shard by shard, so memory stays
bounded by one shard plus the index itself. Everything is written into a partial folder
that is renamed into place at the end; an interrupted build leaves that folder behind and
the same command resumes from the last complete shard.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import faiss
import pyarrow as pa
from tqdm.auto import tqdm

from semsearch import __version__
from semsearch.corpus import Corpus, RowFilter, file_sha256, open_corpus
from semsearch.errors import SemsearchError
from semsearch.index.factory import (
    apply_search_params,
    choose_index,
    create_index,
    prepare_vectors,
    training_rows,
)
from semsearch.index.manifest import IndexSpec, Manifest, SourceSpec
from semsearch.index.shards import ShardStore, read_state, write_state
from semsearch.index.store import (
    DEFAULT_INDEX_DIR,
    IndexFolder,
    check_name,
    partial_folder,
    publish,
)
from semsearch.index.tune import (
    DEFAULT_TUNING_QUERIES,
    TuningResult,
    exact_search,
    tunable_parameter,
    tune_index,
)
from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.model_folder import DEFAULT_MODEL

DEFAULT_SHARD_ROWS = 16_384
TUNING_K = 10
# A fixed nprobe that suits 20k vectors loses a sixth of the neighbours at 300k (measured:
# recall@10 0.84 at nprobe 32 on IVF2048), so approximate indexes are tuned by default.
DEFAULT_TARGET_RECALL = 0.95


@dataclass
class BuildOptions:
    """What `semsearch build` was asked to do."""

    corpus: Path
    name: str | None = None
    text_column: str = "text"
    id_column: str | None = None
    model: str = DEFAULT_MODEL
    index: str = "auto"
    metric: str = "cosine"
    batch_size: int | None = None  # texts per forward pass; None: the device's default
    device: str = "auto"
    quantization: str | None = None  # "int8": a quantised CPU encoder (queries use it too)
    out_dir: Path = field(default_factory=lambda: DEFAULT_INDEX_DIR)
    overwrite: bool = False
    strict: bool = False
    shard_rows: int = DEFAULT_SHARD_ROWS
    show_progress: bool = True
    memory_budget: int | None = None  # bytes the index may take; `auto` picks what fits
    # Tune nprobe/efSearch of an approximate index to this recall@10; None keeps the fixed default.
    target_recall: float | None = DEFAULT_TARGET_RECALL
    tuning_queries: list[str] | None = None  # default: a sample of the corpus' own vectors

    @property
    def index_name(self) -> str:
        return self.name or _stem(Path(self.corpus))


def build_index(options: BuildOptions, encoder: BiEncoder | None = None) -> IndexFolder:
    """Build the index `options` describe and return its folder; see the module docstring."""
    started = time.perf_counter()
    name = options.index_name
    check_name(name)
    final = Path(options.out_dir) / name
    if final.exists() and not options.overwrite:
        raise SemsearchError(
            f"index {name!r} already exists in {options.out_dir}/: pass --overwrite to replace it"
        )
    if options.batch_size is not None and options.batch_size < 1:
        raise SemsearchError(f"--batch-size must be at least 1, not {options.batch_size}")
    if options.shard_rows < 1:
        raise SemsearchError(f"shard_rows must be at least 1, not {options.shard_rows}")
    if options.target_recall is not None and not 0 < options.target_recall <= 1:
        raise SemsearchError(
            f"--target-recall must be in (0, 1] (or 0 to skip tuning), not {options.target_recall}"
        )
    corpus = open_corpus(options.corpus)
    rows = RowFilter(options.text_column, options.id_column, options.strict)
    rows.check_columns(corpus)
    encoder = encoder or BiEncoder.load(
        options.model, device=options.device, quantization=options.quantization
    )
    # Check the index choice now, not after an hour of encoding.
    create_index(_choose(options, corpus.num_rows or 1, encoder.dimension), encoder.dimension)
    partial = partial_folder(Path(options.out_dir), name)
    source_sha256 = file_sha256(corpus.path)
    _prepare_partial(partial, _build_state(options, encoder, source_sha256))
    try:
        shards = _encode_shards(corpus, rows, encoder, partial, options)
        total = shards.row_count()
        if total == 0:
            raise SemsearchError(
                f"{corpus.path.name} has no non-empty {options.text_column!r} texts: nothing to index"
            )
        spec = _choose(options, total, encoder.dimension)
        index = _fill_index(spec, shards, encoder.dimension, options.show_progress)
        tuning = None
        if options.target_recall is not None and tunable_parameter(index):
            tuning = _tune(index, spec, shards, encoder, options)
            spec = replace(spec, search_params={tuning.parameter: tuning.value})
        index_file = partial / "index.faiss"
        faiss.write_index(index, str(index_file))
        shards.write_metadata(partial / "metadata.parquet")
        source = SourceSpec(
            path=str(corpus.path.resolve()),
            format=corpus.format,
            sha256=source_sha256,
            rows_read=rows.rows_seen,
            rows_skipped=rows.skipped,
            text_column=options.text_column,
            id_column=options.id_column,
        )
        Manifest(
            name=name,
            rows=total,
            model=encoder.spec,
            index=spec,
            source=source,
            index_file_bytes=index_file.stat().st_size,
            semsearch_version=__version__,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            build_seconds=round(time.perf_counter() - started, 2),
            tuning=tuning.to_dict() if tuning else None,
        ).write(partial)
        shutil.rmtree(shards.folder)
        (partial / "build_state.json").unlink()
        publish(partial, final, options.overwrite)
    except SemsearchError:
        shutil.rmtree(partial, ignore_errors=True)  # bad input: leave nothing half-written
        raise
    except KeyboardInterrupt:
        print(f"interrupted: run the same command again to resume from {partial}", file=sys.stderr)
        raise
    return IndexFolder(final)


def _choose(options: BuildOptions, rows: int, dimension: int) -> IndexSpec:
    return choose_index(options.index, rows, dimension, options.metric, options.memory_budget)


def _tune(
    index: faiss.Index,
    spec: IndexSpec,
    shards: ShardStore,
    encoder: BiEncoder,
    options: BuildOptions,
) -> TuningResult:
    """Measure recall against exact search over the shards and keep the smallest good value."""
    k = TUNING_K
    if options.tuning_queries:
        query_rows = None
        queries = prepare_vectors(encoder.encode(options.tuning_queries), spec.metric)
    else:
        count = min(DEFAULT_TUNING_QUERIES, shards.row_count())
        query_rows, vectors = shards.sample(count, seed=1)
        queries = prepare_vectors(vectors, spec.metric)
    extra = 0 if query_rows is None else 1
    scores, exact = exact_search(queries, shards.iter_vectors(), k + extra, spec.metric)
    result = tune_index(index, queries, exact, options.target_recall, k, query_rows, scores)
    apply_search_params(index, {result.parameter: result.value})
    verdict = "meets" if result.met else "does NOT meet (the best found)"
    print(
        f"tuned {result.parameter}={result.value}: recall@{k} {result.recall:.3f} on "
        f"{result.queries} queries {verdict} the target {result.target}",
        file=sys.stderr,
    )
    return result


def _build_state(options: BuildOptions, encoder: BiEncoder, source_sha256: str) -> dict:
    """Everything that decides the shards' content; a resume needs all of it unchanged."""
    return {
        "source_sha256": source_sha256,
        "model": replace(encoder.spec, name="").to_dict(),
        "text_column": options.text_column,
        "id_column": options.id_column,
        "strict": options.strict,
        "shard_rows": options.shard_rows,
    }


def _prepare_partial(partial: Path, state: dict) -> None:
    if partial.exists() and read_state(partial) != state:
        shutil.rmtree(partial)  # a different build was interrupted here: start afresh
    elif partial.exists():
        print(f"resuming the interrupted build in {partial}", file=sys.stderr)
    partial.mkdir(parents=True, exist_ok=True)
    write_state(partial, state)


def _encode_shards(
    corpus: Corpus, rows: RowFilter, encoder: BiEncoder, partial: Path, options: BuildOptions
) -> ShardStore:
    shards = ShardStore(partial)
    bar = tqdm(
        total=corpus.num_rows, desc="encoding", unit="row", disable=not options.show_progress
    )
    with bar:
        for shard, chunk in enumerate(_chunks(corpus, options.shard_rows)):
            kept = rows.apply(chunk)
            if not shards.has(shard):
                texts = kept.column(options.text_column).to_pylist()
                vectors = encoder.encode(texts, batch_size=options.batch_size)
                shards.write(shard, vectors, pa.Table.from_batches([kept]))
            bar.update(chunk.num_rows)
    if rows.skipped:
        print(
            f"skipped {rows.skipped} of {rows.rows_seen} rows with a null or empty "
            f"{options.text_column!r} (--strict makes that an error)",
            file=sys.stderr,
        )
    return shards


def _fill_index(
    spec: IndexSpec, shards: ShardStore, dimension: int, show_progress: bool
) -> faiss.Index:
    """Train on a sample, then add every shard's vectors, in order."""
    index = create_index(spec, dimension)
    total = shards.row_count()
    sample_size = training_rows(index, total)
    if sample_size:
        if show_progress:
            print(f"training {spec.factory} on {sample_size} of {total} vectors", file=sys.stderr)
        index.train(prepare_vectors(shards.sample(sample_size)[1], spec.metric))
    bar = tqdm(total=total, desc="indexing", unit="vec", disable=not show_progress)
    with bar:
        for vectors in shards.iter_vectors():
            if len(vectors):
                index.add(prepare_vectors(vectors, spec.metric))
            bar.update(len(vectors))
    apply_search_params(index, spec.search_params)
    return index


def _chunks(corpus: Corpus, rows_per_chunk: int) -> Iterator[pa.RecordBatch]:
    """The corpus re-cut into batches of exactly `rows_per_chunk` rows (the last may be short)."""
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    for batch in corpus.batches(min(rows_per_chunk, 8192)):
        pending.append(batch)
        pending_rows += batch.num_rows
        while pending_rows >= rows_per_chunk:
            table = pa.Table.from_batches(pending).combine_chunks()
            yield table.slice(0, rows_per_chunk).to_batches()[0]
            rest = table.slice(rows_per_chunk)
            pending = rest.to_batches()
            pending_rows = rest.num_rows
    if pending_rows:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz",) + tuple(path.suffixes):
        name = name.removesuffix(suffix)
    return name or "index"
