"""What `semsearch build` is asked (`BuildOptions`, checked up front) and found (`EncodedRows`).

Why a module of its own: the build (`build.py`) and the readers of many corpus files
(`corpus_files.py`), which the build calls, both take these; neither imports the other's
caller to get them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from semsearch.ann.factory import IndexSpec, check_index_type
from semsearch.errors import SemsearchError
from semsearch.ingest.pipeline import DEFAULT_DEPTH
from semsearch.io.corpus import is_many_files
from semsearch.io.corpus_readers import FORMATS
from semsearch.io.filesystems import GLOB_CHARACTERS, as_location, is_uri
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.options import DEFAULT_CHUNK_OVERLAP, DEFAULT_TARGET_RECALL, check_runtime
from semsearch.store.file_names import SEGMENTS_DIR
from semsearch.store.folders import DEFAULT_INDEX_DIR, check_name
from semsearch.store.manifest import LexicalSpec
from semsearch.store.segment import segment_bytes

log = logging.getLogger(__name__)

DEFAULT_PART_ROWS = 16_384


@dataclass
class BuildOptions:
    """What `semsearch build` was asked to do."""

    corpus: Path
    name: str | None = None
    text_column: str | None = "text"  # None: rows without texts (with `vector_column` only)
    id_column: str | None = None
    # With `vector_column`, the model that made the vectors (None: none named; text queries
    # then cannot be encoded); otherwise the model that encodes the texts.
    model: str | None = DEFAULT_MODEL
    index: str = "auto"
    metric: str = "cosine"
    batch_size: int | None = None  # texts per forward pass; None: the device's default
    device: str = "auto"
    quantization: str | None = None  # "int8": a quantised CPU encoder (queries use it too)
    # What encodes (`BiEncoder.use_runtime`; `auto`: OpenVINO on a CPU): what ran is recorded
    # in the operation, not the model.
    runtime: str = "auto"
    # The prompts before each query and each document (`semsearch.models.prompts`), recorded
    # in the manifest; None: the model folder's, "" none.
    query_prompt: str | None = None
    document_prompt: str | None = None
    out_dir: Path = field(default_factory=lambda: DEFAULT_INDEX_DIR)
    overwrite: bool = False
    strict: bool = False
    part_rows: int = DEFAULT_PART_ROWS
    show_progress: bool = True
    memory_budget: int | None = None  # bytes the index may take; `auto` picks what fits
    # Tune nprobe/efSearch of an approximate index to this recall@10; None keeps the fixed default.
    target_recall: float | None = DEFAULT_TARGET_RECALL
    tuning_queries: list[str] | None = None  # default: a sample of the corpus' own vectors
    store_vectors: str = "fp32"  # "fp16" halves the stored vectors on disk
    # The lexical (BM25) part for `--mode lexical|hybrid` queries; None builds none.
    lexical: LexicalSpec | None = field(default_factory=LexicalSpec)
    # Parts queued between the read, tokenise, encode and write stages (memory: about
    # 3 x depth + 4 parts); 0 runs the stages one after the other.
    pipeline_depth: int = DEFAULT_DEPTH
    # Your own vectors: take each row's vector from this column (`semsearch.io.own_vectors`)
    # instead of encoding its text; the `model` then only names what made them.
    vector_column: str | None = None
    # Long texts cut into overlapping chunks of the model's tokens, one row each
    # (`semsearch.ingest.chunk_rows`): `auto` only when some text is longer than the window.
    chunking: str = "auto"
    chunk_tokens: int | None = None  # None: options.DEFAULT_CHUNK_TOKENS, or the window if less
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP

    @property
    def index_name(self) -> str:
        if self.name is not None:
            return self.name
        return default_name(self.corpus) if is_many_files(self.corpus) else _stem(Path(self.corpus))


@dataclass(frozen=True)
class EncodedRows:
    """What encoding the input found: rows read, rows skipped (no text), texts cut at max_length."""

    read: int
    skipped: int
    truncated: int = 0


def counted_rows(read: int, skipped: int, truncated: int, text_column: str | None) -> EncodedRows:
    """The counts, with the one warning every source gives for rows skipped without a text."""
    if skipped:
        log.warning(
            "skipped %d of %d rows with a null or empty %r (--strict makes that an error)",
            skipped,
            read,
            text_column,
        )
    return EncodedRows(read, skipped, truncated)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz",) + tuple(path.suffixes):
        name = name.removesuffix(suffix)
    return name or "index"


def default_name(corpus: str | Path) -> str:
    """An index name for a folder (its name) or a glob (the folder its pattern starts in);
    for a URI, also of one file (its name without suffixes)."""
    parts = as_location(corpus).parts
    plain: list[str] = []
    for part in parts:
        if any(character in part for character in GLOB_CHARACTERS):
            break
        plain.append(part)
    if is_uri(corpus):
        name = plain[-1] if plain else ""
        if len(plain) == len(parts) and name.lower().removesuffix(".gz").endswith(tuple(FORMATS)):
            name = name[: -len("".join(PurePosixPath(name).suffixes))] or name
        return name or Path.cwd().name
    name = Path(*plain).name if plain else ""
    return name or Path.cwd().name


STORE_VECTORS = {"fp32": "float32", "fp16": "float16"}


def check_build_options(options: BuildOptions, name: str) -> None:
    """Every build option checked before the model loads: a mistake costs no seconds."""
    check_name(name)
    final = Path(options.out_dir) / name
    if Path(options.out_dir).exists() and not Path(options.out_dir).is_dir():
        raise SemsearchError(
            f"--out-dir {options.out_dir} is a file: give a folder for the indexes"
        )
    # A folder that cannot be made fails here, not once the model has loaded.
    nearest = next(folder for folder in (final, *final.parents) if folder.exists())
    if not nearest.is_dir():
        raise SemsearchError(cannot_write(options.out_dir, "Not a directory"))
    if final.exists() and not options.overwrite:
        raise SemsearchError(
            f"index {name!r} already exists in {options.out_dir}/: pass --overwrite to replace it, "
            f"or 'semsearch add CORPUS --index {name}' to add rows to it"
        )
    check_index_type(options.index)  # before the model loads: its seconds for nothing
    check_runtime(options.runtime)
    if options.batch_size is not None and options.batch_size < 1:
        raise SemsearchError(f"--batch-size must be at least 1, not {options.batch_size}")
    if options.pipeline_depth < 0:
        raise SemsearchError(f"pipeline_depth must be 0 or more, not {options.pipeline_depth}")
    if options.part_rows < 1:
        raise SemsearchError(f"part_rows must be at least 1, not {options.part_rows}")
    if options.store_vectors not in STORE_VECTORS:
        raise SemsearchError(
            f"--store-vectors {options.store_vectors!r} is not known: use {' or '.join(STORE_VECTORS)}"
        )
    check_target(options.target_recall)


def check_target(target: float | None) -> None:
    """--target-recall in (0, 1], or 0 to skip tuning."""
    if target is not None and not 0 <= target <= 1:
        raise SemsearchError(
            f"--target-recall must be in (0, 1] (or 0 to skip tuning), not {target}"
        )


def cannot_write(out_dir: Path, why: str) -> str:
    """The one-line error for an --out-dir the index cannot be written into."""
    return (
        f"cannot write the index into {out_dir} ({why}): choose a folder you can write to "
        "with --out-dir"
    )


def bytes_needed(
    partial: Path, options: BuildOptions, spec: IndexSpec, usable: int, dimension: int
) -> int:
    """What a build will write whose size is known before it starts: the vectors not yet in
    its partial folder (a resumed build holds some) and the FAISS index; metadata not
    counted. Checked against the free space before anything is encoded."""
    written = sum(path.stat().st_size for path in partial.glob(f"{SEGMENTS_DIR}/*/part-*[0-9].npy"))
    dtype = STORE_VECTORS[options.store_vectors]
    return max(0, segment_bytes(usable, dimension, dtype, spec.factory) - written)
