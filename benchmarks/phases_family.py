"""The phases family: where a build's time goes when nothing is encoded.

`own_vectors` builds an index of the PyPI summaries from their own vectors (a vector
column: the build encodes nothing), so every second it takes is reading, hashing,
writing, training, adding, tuning or bookkeeping; it records the build's phases as the
manifest's operation holds them (`semsearch.phases`). The vectors are the default model's,
made once: read from `vectors_dir` (parts `part-NNN.npy` of 50,000 rows in corpus order,
as a background encode of the corpus leaves them) or encoded here and kept in the
runner's cache.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import PeakRss, read_corpus

from semsearch import phases
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.store.manifest import LexicalSpec

# Phases whose time does not depend on the device FAISS or the model runs on: the issue's
# goal is <= 2 s each at 841k rows on 2 cores.
DEVICE_FREE = ("scan", "fingerprint", "read", "prepare", "write", "write index", "hash")
PART_ROWS = 50_000  # of a vectors_dir's parts


def own_vectors(context) -> dict:
    """Build the first `rows` PyPI summaries (None: all) from their own vectors; the phases."""
    p = context.params
    texts = read_corpus(context.data_dir, "pypi", p["rows"], ["name", "summary"])
    vectors = _vectors(context, texts)
    rows = min(texts.num_rows, len(vectors))  # a vectors_dir may hold fewer parts so far
    corpus = _corpus(context.cache.root / "corpora", texts.slice(0, rows), vectors[:rows])
    options = BuildOptions(
        corpus=corpus,
        name=f"pypi-own-{rows}",
        text_column="summary",
        id_column="name",
        vector_column="vector",
        model=None,
        index=p["index"],
        lexical=LexicalSpec() if p["lexical"] else None,
        out_dir=context.out_dir / "own_vectors",
        overwrite=True,
        show_progress=False,
    )
    with PeakRss() as rss:
        wall, cpu = time.perf_counter(), time.process_time()
        folder = build_index(options)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    manifest = folder.manifest()
    phases = manifest.operation["phases"]
    device_free = {name: phases["phases"].get(name, 0.0) for name in DEVICE_FREE}
    line = {
        "rows": manifest.rows,
        "index": manifest.index.factory,
        "search_params": manifest.index.search_params,
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "phases": phases,
        "slowest_device_free_s": max(device_free.values()),
        "device_free_over_2s": sorted(name for name, s in device_free.items() if s > 2),
        "corpus_bytes": corpus.stat().st_size,
        "file_bytes": folder.size_bytes(),
        "peak_rss_sampled_mib": round(rss.peak / 2**20),
    }
    if p["cpu_phases"]:  # again, the stages one after the other, on the process' CPU clock
        line["cpu_phases"] = _cpu_phases(options)
        cpu = line["cpu_phases"]["phases"]
        line["slowest_device_free_cpu_s"] = max(cpu.get(name, 0.0) for name in DEVICE_FREE)
    return line


def _cpu_phases(options: BuildOptions) -> dict:
    """The build's phases in CPU seconds of the whole process (every thread, FAISS's and
    Arrow's included): the stages run one after the other (`pipeline_depth=0`) on a phase
    timer whose clock is `time.process_time`. On a shared machine wall seconds wait for the
    cores; these do not."""
    timer = phases.PhaseTimer(clock=time.process_time)
    with phases.timing(timer=timer):
        folder = build_index(replace(options, pipeline_depth=0))
    return folder.manifest().operation["phases"]


def _vectors(context, texts: pa.Table) -> np.ndarray:
    """The default model's unit vectors of `texts`' summaries, in row order."""
    p = context.params
    if p["vectors_dir"]:
        parts = sorted(Path(p["vectors_dir"]).glob("part-*.npy"))
        needed = -(-texts.num_rows // PART_ROWS)
        return np.concatenate([np.load(path, mmap_mode="r") for path in parts[:needed]])

    def encode() -> np.ndarray:
        from semsearch.models import BiEncoder
        from semsearch.models.model_folder import DEFAULT_MODEL

        encoder = BiEncoder.load(DEFAULT_MODEL, device="cpu")
        return encoder.encode(texts.column("summary").to_pylist())

    return context.cache.vectors(f"pypi-first{texts.num_rows}-default", encode)


def _corpus(folder: Path, texts: pa.Table, vectors: np.ndarray) -> Path:
    """`texts` with a `vector` column (fixed-size lists of float32) as Parquet, made once."""
    path = folder / f"pypi_own_vectors_first{texts.num_rows}.parquet"
    if not path.is_file():
        dimension = vectors.shape[1]
        flat = pa.array(np.ascontiguousarray(vectors, np.float32).ravel())
        column = pa.FixedSizeListArray.from_arrays(flat, dimension)
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(texts.append_column("vector", column), path)
    return path
